"""What value decomposition (VDN, QMIX) learns with and acts by: the agents' Q-networks and
their targets, epsilon-greedy acting over the legal actions, and QMIX's monotonic mixer."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from interplay.algos.base import NetActor
from interplay.algos.recurrent_q import recurrent_q
from interplay.nets.build import network
from interplay.nets.inputs import obs_tensor
from interplay.nets.recurrent import RecurrentNet
from interplay.run.actors import ActBatch
from interplay.run.mapping import PolicySpec
from interplay.seeding import rng_for


class Explorer(Protocol):
    """The learner an actor acts for: where its networks live, and how often it explores."""

    device: str

    def epsilon(self) -> float: ...


class Mixer(nn.Module):
    """QMIX's monotonic mix: non-negative weights made from the state by hypernetworks."""

    def __init__(self, agents: int, state_dim: int, hidden: int, hyper: int):
        super().__init__()
        self.agents, self.hidden = agents, hidden
        self.w1 = nn.Sequential(nn.Linear(state_dim, hyper), nn.ReLU(),
                                nn.Linear(hyper, agents * hidden))
        self.b1 = nn.Linear(state_dim, hidden)
        self.w2 = nn.Sequential(nn.Linear(state_dim, hyper), nn.ReLU(), nn.Linear(hyper, hidden))
        self.b2 = nn.Sequential(nn.Linear(state_dim, hyper), nn.ReLU(), nn.Linear(hyper, 1))

    def forward(self, q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``q`` ``[b, n]`` (absent agents' entries zero), ``state`` ``[b, s]`` -> ``[b]``."""
        b = q.shape[0]
        w1 = self.w1(state).abs().view(b, self.agents, self.hidden)
        hidden = torch.nn.functional.elu(torch.bmm(q.unsqueeze(1), w1).squeeze(1) + self.b1(state))
        w2 = self.w2(state).abs()
        return (hidden * w2).sum(dim=1) + self.b2(state).squeeze(1)


class AgentQNets:
    """One policy's agents' Q-networks (one shared, or one each), their targets, and the RNG
    its agents explore with."""

    def __init__(self, spec: PolicySpec, net: nn.Module, seed: int, name: str):
        self.spec = spec
        self.k = len(spec.agents)
        self.online = net
        self.target = copy.deepcopy(net)
        self.act_rng = rng_for(seed, name, "act", spec.id)
        self.recurrent = isinstance(net, RecurrentNet)


class QActor(NetActor):
    """Epsilon-greedy over the legal actions, each agent with its own network or the shared
    one; greedy when not exploring."""

    algo: Explorer
    policy: AgentQNets

    def __init__(self, algo: Any, policy: AgentQNets):
        super().__init__(algo, policy)
        # a recurrent policy's states, for callers that keep none of their own
        self._recurrent_state: dict[str, np.ndarray] = {}

    def act(self, batch: ActBatch, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        p = self.policy
        n = batch.obs.shape[0]
        extras: dict[str, np.ndarray] = {}
        slot = batch.slot if batch.slot is not None else np.zeros(n, np.int64)
        if p.recurrent:
            q, extras = recurrent_q(p.online, batch, p.k, self._recurrent_state, self.algo.device)
        else:
            with torch.no_grad():
                q = p.online(obs_tensor(batch.obs, self.algo.device),
                             torch.as_tensor(slot, device=self.algo.device)).cpu().numpy()
        mask = batch.mask
        if mask is not None:
            q = np.where(mask, q, -np.inf)
        action = q.argmax(axis=1)
        if explore:
            take = p.act_rng.random(n) < self.algo.epsilon()
            if take.any():
                legal = mask[take] if mask is not None else np.ones((int(take.sum()), q.shape[1]), bool)
                u = p.act_rng.random(legal.shape) * legal
                action[take] = u.argmax(axis=1)
        return action.astype(np.int64), extras


def q_net(model: Any, inp: Any, n_actions: int, where: str) -> Callable[[], nn.Module]:
    """A maker of one agent's Q-network, for ``agent_nets`` to call once or once per agent."""
    def make() -> nn.Module:
        return network(model, [(inp, 1)], n_actions, 1.0, where)
    return make

"""The recurrent path of the Q-learners (DQN, VDN, QMIX with ``model.recurrent: gru | lstm``).

Acting carries each agent's state from step to step (reset where its episode starts) and keeps
the state each action was taken from beside its transition, so replay stores it. Learning
draws sequences (:mod:`interplay.data.sequences`): the online and target networks unroll each
from the state stored with its first row, over a burn-in that carries no loss and then the
cells that do. Each cell's next observation is valued from the state after that cell, so
n-step targets, episode ends and truncation read as in the feed-forward learners.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from pydantic import Field
from torch import nn

from interplay.algos.onpolicy.recurrent import recurrent_act
from interplay.config.algo import AlgoSettings
from interplay.config.limits import MAX_SIZE
from interplay.config.model import ModelSettings
from interplay.nets.build import Part
from interplay.nets.greedy import GreedyPolicy
from interplay.nets.inputs import obs_tensor
from interplay.nets.recurrent import RecurrentNet, recurrent_net
from interplay.run.actors import ActBatch


class SequenceSettings(AlgoSettings):
    """What a Q-learner with a recurrent model learns from: sequences of ``model.seq_len``
    rows (``batch_size`` of them per gradient step), each after a burn-in."""

    burn_in: int = Field(8, ge=0, le=MAX_SIZE)
    """With ``model.recurrent``: rows of an agent's episode before each sampled sequence that
    only warm the recurrent state (from the state stored when the first of them was acted on)
    and carry no loss; fewer where the episode starts closer."""


class Dueling(nn.Module):
    """The last of ``A + 1`` outputs is the value V, the others advantages: V + A - mean(A)."""

    def forward(self, out: torch.Tensor) -> torch.Tensor:
        adv, value = out[..., :-1], out[..., -1:]
        return value + adv - adv.mean(dim=-1, keepdim=True)


def recurrent_q_net(model: ModelSettings, parts: list[Part], n_actions: int, dueling: bool,
                    where: str) -> RecurrentNet:
    """A Q-network with ``model``'s recurrent cell: one value per action (dueling when asked)."""
    return recurrent_net(model, parts, n_actions + int(dueling), 1.0, where,
                         Dueling() if dueling else None)


def recurrent_q(net: RecurrentNet, batch: ActBatch, agents: int, own: dict[str, np.ndarray],
                device: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Q-values ``[n, A]`` of ``batch`` from each agent's carried state (the runner's
    ``batch.recurrent_state``, else ``own``), which they advance; and the extras that keep
    the state each action was taken from."""
    n = batch.obs.shape[0]
    held = batch.recurrent_state if batch.recurrent_state is not None else own
    slot = batch.slot if batch.slot is not None else (
        np.arange(n) % agents if n % agents == 0 else np.zeros(n, np.int64))
    with torch.no_grad():
        q, state = recurrent_act(net, batch, slot, agents, obs_tensor(batch.obs, device),
                                 held, device)
    return q.cpu().numpy(), {"state": state}


def greedy_recurrent_q(net: RecurrentNet, n_actions: int) -> GreedyPolicy:
    """A recurrent Q-network's greedy acting as a plain module (for export): the best legal
    action, and the next state."""
    return GreedyPolicy(net, [n_actions], 0, None, recurrent=True)


def unroll(net: RecurrentNet, obs: torch.Tensor, start: torch.Tensor,
           valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``net`` over sequences ``obs`` ``[L, B, ...]`` from ``start`` ``[B, S]`` (no episode
    starts inside a sequence): outputs ``[L, B, A]`` and the states after each cell
    ``[L, B, S]``."""
    first = torch.zeros(valid.shape, dtype=torch.bool, device=valid.device)
    out, states = net.sequence(obs, start, first, valid)
    return out, states[1:]


def after_each(net: RecurrentNet, next_obs: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """``net``'s outputs ``[L, B, A]`` at each cell's next observation ``[L, B, ...]``, from
    the state after that cell ``[L, B, S]``."""
    L, B = next_obs.shape[:2]
    out, _ = net.step(next_obs.reshape(L * B, *next_obs.shape[2:]), after.reshape(L * B, -1))
    return out.reshape(L, B, *out.shape[1:])


def n_step_targets(reward: torch.Tensor, valid: torch.Tensor, next_value: torch.Tensor,
                   gamma: float, n: int) -> torch.Tensor:
    """Each cell's n-step target along its sequence ``[L, B]``: the discounted rewards of up
    to ``n`` cells from it (fewer where the sequence's valid cells end), then the discounted
    ``next_value`` after the last of them (zero where nothing is bootstrapped)."""
    L = reward.shape[0]
    ret = torch.zeros_like(reward)
    end = next_value.clone()
    discount = torch.full_like(reward, gamma)

    def ahead(x: torch.Tensor, i: int) -> torch.Tensor:
        return torch.cat([x[i:], torch.zeros_like(x[:i])]) if i else x

    for i in range(min(n, L)):
        here = ahead(valid, i)
        ret = ret + torch.where(here, gamma ** i * ahead(reward, i), torch.zeros_like(reward))
        if i:
            end = torch.where(here, ahead(next_value, i), end)
            discount = torch.where(here, torch.full_like(reward, gamma ** (i + 1)), discount)
    return ret + discount * end


def sequence_weights(weight: np.ndarray | None, learn: np.ndarray) -> np.ndarray | None:
    """Prioritised replay's importance weight of each sequence ``[B]``, for each cell that
    ``learn`` ``[L, B]`` marks, in the order ``x[learn]`` takes them."""
    return None if weight is None else np.broadcast_to(weight, learn.shape)[learn]


def sequence_errors(td: torch.Tensor, learn: torch.Tensor) -> np.ndarray:
    """Each sequence's priority error: its largest TD error over its learned cells."""
    size = td.detach().abs().masked_fill(~learn, 0.0)
    return size.max(dim=0).values.cpu().numpy()


def state_sizes(nets: dict[str, Any]) -> dict[str, int]:
    """The recurrent state each policy's actor acts from (policies with none left out)."""
    return {pid: int(net.state_size) for pid, net in nets.items()
            if isinstance(net, RecurrentNet)}

"""The recurrent path of the on-policy learners (``model.recurrent: gru | lstm``).

Acting carries each agent's hidden state from step to step (reset where its episode starts)
and keeps the state each action was taken from. An update runs the critic along every
agent's whole sequence, from where the last rollout left it, to value the rollout; then learns
on pieces of at most ``seq_len`` cells that never span two episodes, the actor starting each
piece from the state it acted from and the critic from its state in that pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from interplay.algos.onpolicy.nets import ActorCritic, tensor
from interplay.algos.onpolicy.samples import CriticInput, Minibatch, PolicySamples
from interplay.run.actors import ActBatch


def recurrent_act(actor: Any, batch: ActBatch, slot: np.ndarray, agents: int,
                  obs: torch.Tensor, kept: dict[str, np.ndarray],
                  device: str) -> tuple[torch.Tensor, np.ndarray]:
    """The actor's output from each agent's remembered state (``kept["state"]``,
    ``[E, agents, S]``), which it then advances; and the state each action was taken from
    (reset where an agent's episode starts)."""
    n = obs.shape[0]
    env = batch.env if batch.env is not None else np.zeros(n, np.int64)
    size = actor.state_size
    held = kept.get("state")
    copies = int(env.max(initial=0)) + 1
    if held is None or held.shape[0] < copies:
        grown = np.zeros((copies, agents, size), np.float32)
        if held is not None:
            grown[:held.shape[0]] = held
        held = kept["state"] = grown
    state = held[env, slot]
    if batch.first is not None:
        state[batch.first] = 0.0
    out, new = actor.step(obs, torch.from_numpy(state).to(device))
    held[env, slot] = new.cpu().numpy()
    return out, state


class CriticPass:
    """The recurrent critic run along every agent's sequence of a rollout: values ``[T, E, k]``
    in return units, and its states ``[T + 1, E * k, S]`` before each cell and after the
    last."""

    def __init__(self, p: ActorCritic, s: PolicySamples, x: CriticInput,
                 start: np.ndarray | None, device: str):
        r = s.rollout
        T, E, k = r.shape
        rows = x.take()
        grid = rows.new_zeros((T, E, k, rows.shape[1]))
        grid[tuple(tensor(i, device) for i in s.at)] = rows
        size = p.critic.state_size
        if start is None or start.shape != (E * k, size):
            start = np.zeros((E * k, size), np.float32)
        with torch.no_grad():
            v, states = p.critic.sequence(
                grid.reshape(T, E * k, -1), tensor(start, device),
                tensor(r.first.reshape(T, E * k), device),
                tensor(r.valid.reshape(T, E * k), device))
        self.states = states.cpu().numpy()
        self.value = p.return_units(v.squeeze(-1)).reshape(T, E, k)
        self.after = self.states[1:].reshape(T, E, k, size)  # the state after each cell

    def next_values(self, p: ActorCritic, x: torch.Tensor, cells: tuple[np.ndarray, ...],
                    device: str) -> np.ndarray:
        """The critic's values of next observations ``x`` from the states after ``cells``."""
        with torch.no_grad():
            v, _ = p.critic.step(x, tensor(self.after[cells], device))
        return p.return_units(v.squeeze(-1))


def sequence_minibatches(p: ActorCritic, s: PolicySamples, x: CriticInput, adv: np.ndarray,
                         target: np.ndarray, critic_states: np.ndarray,
                         device: str) -> tuple[int, Callable[[torch.Tensor], Minibatch]]:
    """How many sequences, and what a minibatch of sequence indices gives: each agent's
    sequence cut into pieces of at most ``seq_len`` cells that never span two episodes (see
    :meth:`Rollout.pieces`). A piece starts from the actor's state when it took the piece's
    first action, and from the critic's state in the :class:`CriticPass` that valued it."""
    r, at = s.rollout, s.at
    piece, offset, n = r.pieces(p.model.seq_len)
    where = (offset[at], piece[at])  # each row's cell in [L, n]
    L = int(where[0].max()) + 1  # the longest piece (short episodes make short pieces)
    where_t = tuple(tensor(w, device) for w in where)

    def seq(rows: np.ndarray | torch.Tensor) -> torch.Tensor:
        rows = tensor(rows, device) if isinstance(rows, np.ndarray) else rows
        grid = rows.new_zeros((L, n, *rows.shape[1:]))
        grid[where_t] = rows
        return grid

    heads = where[0] == 0  # the rows each piece starts with
    order = np.argsort(where[1][heads])
    actor_start = tensor(np.ascontiguousarray(r.extras["state"][at][heads][order]), device)
    k = r.shape[2]
    states = critic_states[at[0], at[1] * k + at[2]]  # before each row
    critic_start = tensor(np.ascontiguousarray(states[heads][order]), device)
    valid = seq(np.ones(len(adv), bool))
    obs, critic_obs = seq(s.obs), seq(x.take())
    first = seq(r.first[at])
    action, logp_old = seq(s.action), seq(s.logp)
    adv_t, target_t = seq(adv.astype(np.float32)), seq(target.astype(np.float32))
    mask = None if s.mask is None or s.mask.all() else seq(s.mask)

    def pick(i: torch.Tensor) -> Minibatch:
        v = valid[:, i]
        out, _ = p.actor.sequence(obs[:, i], actor_start[i], first[:, i], v)
        value, _ = p.critic.sequence(critic_obs[:, i], critic_start[i], first[:, i], v)
        return Minibatch(out[v], value.squeeze(-1)[v], action[:, i][v], logp_old[:, i][v],
                         adv_t[:, i][v], target_t[:, i][v],
                         None if mask is None else mask[:, i][v])

    return n, pick

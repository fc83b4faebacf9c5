"""What an on-policy update reads from a rollout, as typed samples.

A policy's rollout is ``[T, E, k, ...]`` (see :mod:`interplay.data.rollout`); an update takes
its transitions as rows in ``(t, e, j)`` order (:class:`PolicySamples`). A critic's input
(:class:`CriticInput`) is each row's own observation and, for a centralised critic, its row of
a table kept once per (tick, copy): the env's global state, or the trained groups' blocks of
observations at that tick, each ``[E, k, D]`` block flattened over its agent axis and the
groups side by side. Rows join their table row only where a minibatch or a chunk of values
is taken, so memory grows with the agents, not with their square.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import torch

from interplay.algos.onpolicy.nets import ActorCritic, mask_tensor, tensor
from interplay.data.rollout import Rollout
from interplay.nets.attention import OwnTokenCritic

Cells = tuple[np.ndarray, np.ndarray, np.ndarray]  # (t, e, j) of each row


class PolicySamples(NamedTuple):
    """One policy's transitions in a rollout as rows, in ``(t, e, j)`` order; observations
    standardised as when acting."""

    rollout: Rollout
    at: Cells  # each row's cell
    raw_obs: np.ndarray  # as the env gave them, for the running statistics
    obs: np.ndarray
    next_obs: np.ndarray
    action: np.ndarray
    logp: np.ndarray  # of the action when it was taken
    mask: np.ndarray | None
    terminated: np.ndarray
    teacher: np.ndarray | None = None  # the teacher's advice on each row (``algo.teacher``)

    @property
    def slot(self) -> np.ndarray:
        return self.at[2]

    @property
    def env(self) -> np.ndarray:
        return self.at[1]

    @property
    def step(self) -> np.ndarray:
        """The runner step that closed each row's transition."""
        return self.rollout.step[self.at]


def policy_samples(p: ActorCritic, r: Rollout) -> PolicySamples:
    at = np.nonzero(r.valid)
    obs = r.obs[at]
    teacher = r.extras.get("teacher")
    return PolicySamples(
        rollout=r, at=at, raw_obs=obs, obs=p.observe(obs), next_obs=p.observe(r.next_obs[at]),
        action=r.action[at], logp=r.extras["logp"][at],
        mask=None if r.mask is None else r.mask[at], terminated=r.terminated[at],
        teacher=None if teacher is None else teacher[at])


class CriticInput(NamedTuple):
    """A critic's input rows: each row's own observation, then (centralised) row ``row[i]`` of
    ``table``."""

    own: torch.Tensor  # [n, D]
    table: torch.Tensor | None = None  # [M, W]: one row per (tick, copy)
    row: torch.Tensor | None = None  # [n]

    @property
    def rows(self) -> int:
        return self.own.shape[0]

    @property
    def joined(self) -> bool:
        return self.table is not None

    def take(self, i: torch.Tensor | slice = slice(None)) -> torch.Tensor:
        """Rows ``i``'s whole inputs ``[len(i), D + W]``."""
        if self.table is None or self.row is None:
            return self.own[i]
        own = self.own[i]
        return torch.cat([own, self.table[self.row[i]].to(own.dtype)], dim=1)

    def select(self, i: torch.Tensor) -> CriticInput:
        """Rows ``i`` alone, their table as it is."""
        return CriticInput(self.own[i], self.table, None if self.row is None else self.row[i])


def critic_values(critic: torch.nn.Module, x: CriticInput, i: torch.Tensor | slice,
                  slot: torch.Tensor) -> torch.Tensor:
    """The critic's outputs at rows ``i`` of ``x`` (``slot``: theirs). An attention critic
    attends once per table row those rows share (a tick's agents share one), not once per row."""
    if isinstance(critic, OwnTokenCritic) and x.row is not None:
        return critic(x.take(i), slot, share=x.row[i])
    return critic(x.take(i), slot)


class CriticInputs(NamedTuple):
    """What a policy's critic reads at its rows' observations and at their next ones."""

    now: CriticInput
    next: CriticInput


def own_inputs(s: PolicySamples, device: str) -> CriticInputs:
    """An independent critic's: the rows' own observations."""
    return CriticInputs(CriticInput(tensor(s.obs, device)), CriticInput(tensor(s.next_obs, device)))


def state_inputs(pid: str, s: PolicySamples, device: str) -> CriticInputs:
    """The env's global state when each row's agent acted, and after its step: rows of the
    rollout's table of states, one per (tick, copy)."""
    r = s.rollout
    if r.states is None or r.state is None or r.next_state is None:
        raise ValueError(f"algo.state: the rollout of policy {pid!r} holds no global state, "
                         "though its critic reads one")
    table = tensor(r.states, device)
    return CriticInputs(
        CriticInput(tensor(s.obs, device), table, tensor(r.state[s.at], device)),
        CriticInput(tensor(s.next_obs, device), table, tensor(r.next_state[s.at], device)))


def joint_inputs(samples: dict[str, PolicySamples], groups: dict[str, tuple[int, int]],
                 device: str, live: bool = False) -> dict[str, CriticInputs]:
    """Every trained agent's observation at each row's tick in its copy, beside the row's own.

    ``groups`` is each trained policy's ``(k, obs_dim)``, in the joint's column order; a
    policy with no rows this rollout, and agents that closed no transition at a tick (turn-based
    envs, agents that left), leave zeros in their place. With ``live``, each table row ends with
    one flag per agent in the same order: 1 where the agent closed a transition at that tick
    (what an attention critic masks by, :mod:`interplay.nets.attention`).
    """
    if not samples:
        return {}
    T, copies, _ = next(iter(samples.values())).rollout.shape
    if _in_lockstep(samples, groups):
        # The rows are the rollout's [T, E, k, D] blocks in order: a (tick, copy)'s joint
        # observation is its blocks flattened over the agent axis, side by side.
        row = {pid: np.arange(len(s.obs)) // groups[pid][0] for pid, s in samples.items()}
        arrays = [_side_by_side([getattr(samples[q], key).reshape(T * copies, -1) for q in groups])
                  for key in ("obs", "next_obs")]
        flags = np.ones((T * copies, sum(k for k, _ in groups.values())), arrays[0].dtype)
    else:
        ticks, tick = np.unique(np.concatenate([s.step for s in samples.values()]),
                                return_inverse=True)
        bounds = np.cumsum([0] + [len(s.obs) for s in samples.values()])
        row = {pid: tick[lo:hi] * copies + s.env for (pid, s), lo, hi
               in zip(samples.items(), bounds[:-1], bounds[1:], strict=True)}
        arrays = [_joint_table(samples, groups, row, len(ticks) * copies, next_obs)
                  for next_obs in (False, True)]
        flags = _live_table(samples, groups, row, len(ticks) * copies, arrays[0].dtype)
    if live:
        arrays = [np.concatenate([a, flags.astype(a.dtype)], axis=1) for a in arrays]
    tables = [tensor(a, device) for a in arrays]
    out = {}
    for pid, s in samples.items():
        at = tensor(row[pid], device)
        out[pid] = CriticInputs(CriticInput(tensor(s.obs, device), tables[0], at),
                                CriticInput(tensor(s.next_obs, device), tables[1], at))
    return out


def _in_lockstep(samples: dict[str, PolicySamples], groups: dict[str, tuple[int, int]]) -> bool:
    """Whether every agent of every trained group closed one transition in each of the
    rollout's ticks, the same ticks for all (a parallel env whose agents all stay)."""
    if samples.keys() != groups.keys():
        return False
    ticks = None
    for s in samples.values():
        r = s.rollout
        first = r.step[:, :1, :1]
        if not r.valid.all() or not (r.step == first).all():
            return False
        if ticks is not None and not np.array_equal(first.ravel(), ticks):
            return False
        ticks = first.ravel()
    return ticks is not None and bool(np.all(np.diff(ticks) > 0))


def _side_by_side(blocks: list[np.ndarray]) -> np.ndarray:
    return blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=1)


def _joint_table(samples: dict[str, PolicySamples], groups: dict[str, tuple[int, int]],
                 row: dict[str, np.ndarray], size: int, next_obs: bool) -> np.ndarray:
    """``[size, W]``: each (tick, copy)'s blocks of observations, flattened over their agents
    and set side by side in ``groups``' order."""
    dtype = np.result_type(*((s.next_obs if next_obs else s.obs).dtype for s in samples.values()))
    blocks = []
    for pid, (k, dim) in groups.items():
        block = np.zeros((size, k, dim), dtype)
        s = samples.get(pid)
        if s is not None:
            block[row[pid], s.slot] = s.next_obs if next_obs else s.obs
        blocks.append(block.reshape(size, k * dim))
    return _side_by_side(blocks)


def _live_table(samples: dict[str, PolicySamples], groups: dict[str, tuple[int, int]],
                row: dict[str, np.ndarray], size: int, dtype: np.dtype) -> np.ndarray:
    """``[size, agents]``: 1 where the agent closed a transition at that (tick, copy)."""
    blocks = []
    for pid, (k, _) in groups.items():
        block = np.zeros((size, k), dtype)
        s = samples.get(pid)
        if s is not None:
            block[row[pid], s.slot] = 1
        blocks.append(block)
    return _side_by_side(blocks)


class Minibatch(NamedTuple):
    """One gradient step's samples: what the networks give for them now, beside what the
    rollout kept and the update computed."""

    out: torch.Tensor  # the actor's output (logits, or a Gaussian's mean and log-std)
    value: torch.Tensor  # the critic's value, in the units it predicts
    action: torch.Tensor
    old_logp: torch.Tensor  # of the action when it was taken
    advantage: torch.Tensor
    target: torch.Tensor  # the critic's return target
    mask: torch.Tensor | None  # legal actions, None when all were legal
    teacher: torch.Tensor | None = None  # the teacher's advice (``algo.teacher``)


def row_minibatches(p: ActorCritic, s: PolicySamples, x: CriticInput, adv: np.ndarray,
                    target: np.ndarray, device: str) -> tuple[int, Callable[[torch.Tensor], Minibatch]]:
    """How many rows, and what a minibatch of row indices gives (feed-forward networks)."""
    obs, slot = tensor(s.obs, device), tensor(s.slot, device)
    action, logp_old = tensor(s.action, device), tensor(s.logp, device)
    mask = mask_tensor(s.mask, device)
    adv_t = tensor(adv.astype(np.float32), device)
    target_t = tensor(target.astype(np.float32), device)
    teacher = None if s.teacher is None else tensor(s.teacher, device)

    def pick(i: torch.Tensor) -> Minibatch:
        return Minibatch(p.actor(obs[i], slot[i]), critic_values(p.critic, x, i, slot[i]).squeeze(1),
                         action[i], logp_old[i], adv_t[i], target_t[i],
                         None if mask is None else mask[i],
                         None if teacher is None else teacher[i])

    return len(adv), pick

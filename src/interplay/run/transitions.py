"""Turn-based transition bookkeeping for one policy, vectorized over copies and agents.

A transition opens when an agent acts. Every reward the agent receives from any env step
until its next turn is added to it; its next turn closes it (the next observation is what it
sees then). When the agent is terminated or truncated, or the episode ends, its open
transition is closed with its last observation and those flags. Rewards that reach an agent
before its first action in an episode are carried into its first transition. So the rewards in
an agent's transitions sum to what the env gave it.

Arrays are ``[E, k]`` (copies × the policy's agents); one closed batch per step per policy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import warnings
from dataclasses import dataclass

import numpy as np


@dataclass
class Transitions:
    """Transitions of one policy closed in one step, one row each."""

    obs: np.ndarray  # [n, obs_dim] in the observation's own dtype (uint8 frames stay uint8)
    action: np.ndarray  # [n, *action_shape]
    reward: np.ndarray  # [n] float64: all rewards since the action
    next_obs: np.ndarray  # [n, obs_dim]
    terminated: np.ndarray  # [n] bool
    truncated: np.ndarray  # [n] bool
    env: np.ndarray  # [n] int: the copy
    slot: np.ndarray  # [n] int: the agent's index within the policy
    mask: np.ndarray | None  # [n, mask_dim] legal actions when acting
    next_mask: np.ndarray | None  # [n, mask_dim] legal actions at the next observation
    extras: dict[str, np.ndarray]  # what the actor returned beside the action (log-probs, values)
    step: np.ndarray  # [n] int: the runner's step (since its reset) in which the transition closed
    first: np.ndarray | None = None  # [n] bool: the agent's first transition of its episode
    # The env's global state, where the env keeps one (see ``VecStep.state``): each state the
    # rows name is held once in ``states``, however many agents' rows name it.
    state: np.ndarray | None = None  # [n] int: the row of ``states`` when the agent acted
    next_state: np.ndarray | None = None  # [n] int: the row of ``states`` at next_obs
    states: np.ndarray | None = None  # [m, state_dim] float32
    # [m, 2] int: each state's (when, copy): ``when`` is twice the runner's tick at which it
    # was seen, plus one for the final state of an episode; one state has one key everywhere.
    state_keys: np.ndarray | None = None
    # ``(T, E, k)`` when the rows are T whole ``[E, k]`` slices of the policy's agents, one
    # after another in (time, copy, slot) order, so that ``x.reshape(T, E, k, ...)`` is each
    # field's block (storage writes them whole); None for rows in any other arrangement.
    grid: tuple[int, int, int] | None = None

    def __len__(self) -> int:
        return int(self.reward.shape[0])

    def select(self, keep: np.ndarray | slice) -> Transitions:
        """The rows where ``keep`` ([n] bool) is true, or in ``keep`` (a slice), in order
        (sharing the states)."""
        def pick(x: np.ndarray | None) -> np.ndarray | None:
            return None if x is None else x[keep]

        return Transitions(
            obs=self.obs[keep], action=self.action[keep], reward=self.reward[keep],
            next_obs=self.next_obs[keep], terminated=self.terminated[keep],
            truncated=self.truncated[keep], env=self.env[keep], slot=self.slot[keep],
            mask=pick(self.mask), next_mask=pick(self.next_mask),
            extras={k: v[keep] for k, v in self.extras.items()}, step=self.step[keep],
            first=pick(self.first), state=pick(self.state), next_state=pick(self.next_state),
            states=self.states, state_keys=self.state_keys,
        )

    def slices(self) -> list[Transitions]:
        """These rows one ``[E, k]`` slice at a time (each a grid of one), when they are a grid."""
        assert self.grid is not None
        T, E, k = self.grid
        if T == 1:
            return [self]
        n = E * k
        out = []
        for i in range(T):
            part = self.select(slice(i * n, (i + 1) * n))
            part.grid = (1, E, k)
            out.append(part)
        return out

    def shifted(self, copies: int) -> Transitions:
        """These rows with their env copies numbered ``copies`` on (a runner's copies after
        those of the runners before it)."""
        keys = self.state_keys
        if keys is not None:
            keys = keys + np.array([0, copies], keys.dtype)
        return dataclasses.replace(self, env=self.env + copies, state_keys=keys, grid=None)

    def state_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """``[n, state_dim]`` each: the env's global state when each row's agent acted, and at
        its next observation."""
        if self.states is None or self.state is None or self.next_state is None:
            raise ValueError("these transitions carry no global state (the env keeps none, or "
                             "it was not asked for)")
        return self.states[self.state], self.states[self.next_state]


def stream_order(stream: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of several streams (one per copy and agent), each in arrival order: every row's
    successor in its stream (-1 for a stream's last) and its position in its stream (0 for
    its first)."""
    n = stream.shape[0]
    order = np.argsort(stream, kind="stable")  # grouped by stream, arrival order within
    grouped = stream[order]
    starts = np.r_[True, grouped[1:] != grouped[:-1]] if n else np.zeros(0, bool)
    position = np.empty(n, np.int64)
    position[order] = np.arange(n) - np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    follows = np.r_[~starts[1:], False] if n else np.zeros(0, bool)
    nxt = np.full(n, -1)
    nxt[order[follows]] = order[np.flatnonzero(follows) + 1]
    return nxt, position


class FrameStack:
    """The last ``size`` observations of each (copy, agent), oldest first, zeros at the start."""

    def __init__(self, num_envs: int, k: int, dim: int, size: int, dtype: type = np.float32):
        self.size = size
        self.buf = np.zeros((num_envs, k, size, dim), dtype)

    def push(self, where: np.ndarray, frames: np.ndarray) -> np.ndarray:
        """Add ``frames[where]`` and return the stacked view ``[E, k, size*dim]``."""
        rows = self.buf[where]
        rows[:, :-1] = rows[:, 1:]
        rows[:, -1] = frames[where]
        self.buf[where] = rows
        return self.buf.reshape(self.buf.shape[0], self.buf.shape[1], -1)

    def clear(self, where: np.ndarray) -> None:
        self.buf[where] = 0.0


class TransitionBook:
    """Open transitions of one policy's agents in every copy."""

    def __init__(self, num_envs: int, k: int, obs_dim: int, action_shape: tuple[int, ...],
                 action_dtype: type, mask_dim: int, obs_dtype: type = np.float32):
        E = num_envs
        self.open = np.zeros((E, k), bool)
        self.acc = np.zeros((E, k), np.float64)
        self.pending = np.zeros((E, k), np.float64)
        self.obs = np.zeros((E, k, obs_dim), obs_dtype)
        self.action = np.zeros((E, k, *action_shape), action_dtype)
        self.mask = np.ones((E, k, mask_dim), bool) if mask_dim else None
        self.first = np.zeros((E, k), bool)
        self.extras: dict[str, np.ndarray] = {}
        # The runner's tick at which each agent acted, where the env keeps a global state: the
        # runner then finds the state it acted in (see Transitions.state).
        self.at: np.ndarray | None = None
        self._every: tuple[np.ndarray, np.ndarray] | None = None  # (copy, slot) of every row
        # What ``open`` is known to hold since whole blocks were last opened or closed (False:
        # not known, look); kept where whole blocks change, cleared wherever rows do.
        self._all_open = False
        self._none_open = False

    def add_rewards(self, reward: np.ndarray) -> None:
        """Book one env step's rewards ``[E, k]``: into open transitions, else held back."""
        if self._all_open:  # nothing to hold back
            self.acc += reward
            return
        booked = reward * self.open  # exact: each reward times 1 or 0
        self.acc += booked
        self.pending += reward - booked

    def start(self, e: np.ndarray, s: np.ndarray, obs: np.ndarray, action: np.ndarray,
              mask: np.ndarray | None, extras: dict[str, np.ndarray],
              first: np.ndarray | bool = False, at: int | None = None) -> None:
        """Open transitions for the agents ``(e[i], s[i])`` that act now; ``first`` marks
        those acting for the first time in their episode; ``at`` is the runner's tick, where
        the env keeps a global state."""
        if at is not None:
            if self.at is None:
                self.at = np.zeros(self.open.shape, np.int64)
            self.at[e, s] = at
        if len(e) == self.open.size:  # every agent of every copy: whole blocks, no gathers
            self._start_all(obs, action, mask, extras, first)
            return
        if self.open[e, s].any():
            raise RuntimeError("an agent acted with a transition still open; close it first")
        self.open[e, s] = True
        self._none_open = False
        self.acc[e, s] = self.pending[e, s]
        self.pending[e, s] = 0.0
        self.obs[e, s] = obs
        self.action[e, s] = action
        self.first[e, s] = first
        if self.mask is not None and mask is not None:
            self.mask[e, s] = mask
        for name, value in extras.items():
            self._extra(name, value)[e, s] = value

    def _start_all(self, obs: np.ndarray, action: np.ndarray, mask: np.ndarray | None,
                   extras: dict[str, np.ndarray], first: np.ndarray | bool) -> None:
        shape = self.open.shape
        if not self._none_open and self.open.any():
            raise RuntimeError("an agent acted with a transition still open; close it first")
        self.open[...] = True
        self._all_open, self._none_open = True, False
        self.acc[...] = self.pending
        self.pending[...] = 0.0
        self.obs[...] = obs.reshape(self.obs.shape)
        self.action[...] = action.reshape(self.action.shape)
        self.first[...] = np.reshape(first, shape) if np.ndim(first) else first
        if self.mask is not None and mask is not None:
            self.mask[...] = mask.reshape(self.mask.shape)
        for name, value in extras.items():
            self._extra(name, value)[...] = value.reshape(*shape, *value.shape[1:])

    def _extra(self, name: str, value: np.ndarray) -> np.ndarray:
        """The ``[E, k, ...]`` store of extra ``name`` (made at its first ``value``)."""
        store = self.extras.get(name)
        if store is None:
            store = self.extras[name] = np.zeros((*self.open.shape, *value.shape[1:]),
                                                 value.dtype)
        return store

    def close(self, where: np.ndarray, next_obs: np.ndarray, next_mask: np.ndarray | None,
              terminated: np.ndarray, truncated: np.ndarray, step: int) -> Transitions | None:
        """Close the open transitions at ``where`` ``[E, k]``; None if there were none.

        Where the env keeps a global state, each row's ``state`` is the tick its agent acted
        at, for the runner to turn into the state itself."""
        sel = where & self.open
        n = int(np.count_nonzero(sel))
        if not n:
            return None
        if n == sel.size:  # every agent of every copy: whole blocks in (copy, slot) order
            return self._close_all(next_obs, next_mask, terminated, truncated, step)
        e, s = np.nonzero(sel)
        self.open[e, s] = False
        self._all_open = False
        out = Transitions(
            obs=self.obs[e, s], action=self.action[e, s], reward=self.acc[e, s].copy(),
            next_obs=next_obs[e, s], terminated=terminated[e, s].copy(),
            truncated=truncated[e, s].copy(), env=e, slot=s,
            mask=None if self.mask is None else self.mask[e, s],
            next_mask=None if next_mask is None else next_mask[e, s],
            extras={k: v[e, s] for k, v in self.extras.items()}, step=np.full(len(e), step),
            first=self.first[e, s], state=None if self.at is None else self.at[e, s],
        )
        self.acc[e, s] = 0.0
        return out

    def _close_all(self, next_obs: np.ndarray, next_mask: np.ndarray | None,
                   terminated: np.ndarray, truncated: np.ndarray, step: int) -> Transitions:
        E, k = self.open.shape
        n = E * k
        if self._every is None:  # read-only: every batch of whole slices shares them
            self._every = (np.repeat(np.arange(E), k), np.tile(np.arange(k), E))
            for x in self._every:
                x.flags.writeable = False
        e, s = self._every

        def rows(x: np.ndarray) -> np.ndarray:
            return x.reshape(n, *x.shape[2:]).copy()

        self.open[...] = False
        self._all_open, self._none_open = False, True
        out = Transitions(
            obs=rows(self.obs), action=rows(self.action), reward=rows(self.acc),
            next_obs=rows(next_obs), terminated=rows(terminated), truncated=rows(truncated),
            env=e, slot=s, mask=None if self.mask is None else rows(self.mask),
            next_mask=None if next_mask is None else rows(next_mask),
            extras={k_: rows(v) for k_, v in self.extras.items()}, step=np.full(n, step),
            first=rows(self.first), state=None if self.at is None else rows(self.at),
            grid=(1, E, k),
        )
        self.acc[...] = 0.0
        return out

    def discard(self, copies: np.ndarray) -> None:
        """Abandon everything open in ``copies`` (their episode was dropped)."""
        self.open[copies] = False
        self._all_open = False
        self.acc[copies] = 0.0
        self.pending[copies] = 0.0

    def forget_pending(self, copies: np.ndarray) -> None:
        """A new episode starts in ``copies``: rewards held for agents that never acted lapse."""
        self.pending[copies] = 0.0


def concat(parts: list[Transitions]) -> Transitions:
    """One batch from several, in order."""
    if len(parts) == 1:
        return parts[0]

    def cat(name: str) -> np.ndarray | None:
        values = [getattr(p, name) for p in parts]
        return None if values[0] is None else np.concatenate(values)

    out = Transitions(
        obs=cat("obs"), action=cat("action"), reward=cat("reward"), next_obs=cat("next_obs"),
        terminated=cat("terminated"), truncated=cat("truncated"), env=cat("env"),
        slot=cat("slot"), mask=cat("mask"), next_mask=cat("next_mask"),
        extras={k: np.concatenate([p.extras[k] for p in parts]) for k in parts[0].extras},
        step=cat("step"), first=cat("first"), grid=_stacked_grid(parts),
    )
    if parts[0].states is not None:  # each part's rows name its own states: renumber them
        at = np.cumsum([0] + [len(p.states) for p in parts[:-1]])  # type: ignore[arg-type]
        out.state = np.concatenate([p.state + a for p, a in zip(parts, at, strict=True)])
        out.next_state = np.concatenate([p.next_state + a for p, a in zip(parts, at, strict=True)])
        out.states, out.state_keys = cat("states"), cat("state_keys")
    return out


def _stacked_grid(parts: list[Transitions]) -> tuple[int, int, int] | None:
    """The grid of ``parts`` one after another: slices of one shape stay a grid."""
    grids = [p.grid for p in parts]
    first = grids[0]
    if first is None or any(g is None or g[1:] != first[1:] for g in grids):
        return None
    return (sum(g[0] for g in grids if g is not None), first[1], first[2])


def table_of_row_states(t: Transitions) -> Transitions:
    """``t`` as checkpoints written before states were kept once per (tick, copy) hold it,
    each row with its env's global state in ``extras`` (``state``, ``next_state``): the same
    rows naming a table of those states; ``t`` as it is when it has no such extras. A state's
    key is made from its numbers (below every tick's): one key, one state."""
    if t.states is not None or not {"state", "next_state"} <= set(t.extras):
        return t
    n = len(t)
    extras = dict(t.extras)
    states = np.concatenate([extras.pop("state"), extras.pop("next_state")]).astype(np.float32)
    when = [-1 - int.from_bytes(hashlib.blake2b(row.tobytes(), digest_size=7).digest(), "little")
            for row in states]
    keys = np.stack([np.array(when, np.int64), np.concatenate([t.env, t.env])], axis=1)
    return dataclasses.replace(t, extras=extras, state=np.arange(n), next_state=n + np.arange(n),
                               states=states, state_keys=keys.astype(np.int64))


HOLD_LIMIT = 100_000
"""Transitions of one copy's unfinished episode a policy holds before handing them out."""


class EpisodeHold:
    """Closed transitions held back until their copy's episode ends.

    A learner then only ever sees whole episodes: when a copy's episode is dropped (its env
    raised), what it had closed so far is thrown away here instead of having been learned from.
    Rows come out in the order they went in, so each agent's transitions stay in time order.
    Each held batch keeps a mask of its rows still held, so rows are copied once, on release.

    An episode that never ends (no termination, no step limit) would be held without bound:
    once one copy holds more than ``limit`` rows, the next :meth:`release` hands that copy's
    rows out unfinished, as ``truncate_episodes`` would have, with a warning the first time.
    """

    def __init__(self, limit: int | None = None) -> None:
        self.limit = HOLD_LIMIT if limit is None else limit
        self._held: list[tuple[Transitions, np.ndarray]] = []  # (batch, rows still held)
        self._rows = 0  # rows held, all copies together
        # No copy can hold more than ``limit`` rows before ``_rows`` passes this, so the
        # copies are counted one by one only then.
        self._next_count = self.limit
        self._cut: np.ndarray | None = None  # copies to hand out unfinished at the next release
        self.warned = False

    def __len__(self) -> int:
        return self._rows

    @property
    def parts(self) -> list[Transitions]:
        """What is held, batch by batch."""
        return [t if held.all() else t.select(held) for t, held in self._held]

    @parts.setter
    def parts(self, parts: list[Transitions]) -> None:
        self._held = [(t, np.ones(len(t), bool)) for t in parts]
        self._rows = sum(len(t) for t in parts)
        self._next_count = self._rows  # count at the next add

    def add(self, t: Transitions) -> bool:
        """Hold ``t``; True when a copy now holds more than ``limit`` rows of one episode (the
        next :meth:`release` hands them out)."""
        self._held.append((t, np.ones(len(t), bool)))
        self._rows += len(t)
        return self._rows > self._next_count and self._count()

    def _count(self) -> bool:
        counts = np.bincount(np.concatenate([t.env[held] for t, held in self._held]))
        over = counts > self.limit
        self._next_count = self._rows + self.limit - int(counts[~over].max(initial=0))
        if not over.any():
            return False
        self._cut = over
        if not self.warned:
            self.warned = True
            warnings.warn(
                f"train.batch_mode complete_episodes: an episode has run for more than "
                f"{self.limit:,} transitions of one policy without ending, and holding its "
                "transitions until it ends would grow memory without bound. They are handed to "
                "the learner unfinished now (as train.batch_mode: truncate_episodes would), and "
                f"again every {self.limit:,}. If the env never ends its episodes, set "
                "train.max_steps_per_episode, or train.batch_mode: truncate_episodes.",
                RuntimeWarning, stacklevel=4)
        return True

    def release(self, ended: np.ndarray) -> Transitions | None:
        """Take out the rows of the copies whose episode ended (``ended`` is [E] bool), and of
        those that passed the limit."""
        if self._cut is not None:
            cut, self._cut = self._cut, None
            ended = ended.copy()
            ended[:cut.shape[0]] |= cut
        out = self._take(ended)
        return concat(out) if out else None

    def discard(self, copies: np.ndarray) -> None:
        """Throw away the rows of ``copies`` ([E] bool)."""
        self._take(copies)

    def _take(self, copies: np.ndarray) -> list[Transitions]:
        taken: list[Transitions] = []
        kept: list[tuple[Transitions, np.ndarray]] = []
        for t, held in self._held:
            sel = copies[t.env] & held
            if not sel.any():
                kept.append((t, held))
                continue
            taken.append(t if sel.all() else t.select(sel))
            n = int(np.count_nonzero(sel))
            self._rows -= n
            self._next_count -= n  # the copies left hold no more than before
            held &= ~sel
            if held.any():
                kept.append((t, held))
        self._held = kept
        return taken

"""A replay buffer for the transitions of many agents, independent of any learner.

Rows live in preallocated arrays, written a whole step's batch at a time and overwritten
oldest first. Each row remembers its *stream*: who closed it (a source name, the env copy and
the agent's slot). A row is linked to the next row of its stream when that one arrives and
continues it (the episode did not end in between, and its observation is the row's next
observation), so n-step returns are built at sampling time for any ``n`` and ``gamma``: a
return stops early where the episode ended, where the next row is not here yet, or where it
was overwritten, and bootstraps from wherever it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from interplay.transitions import Transitions


@dataclass
class Sample:
    """A sampled batch; ``reward`` is the discounted n-step return."""

    index: np.ndarray  # [b] rows the samples start at
    obs: np.ndarray  # [b, obs_dim]
    action: np.ndarray  # [b, *action_shape]
    mask: np.ndarray | None  # [b, mask_dim] legal actions at obs
    reward: np.ndarray  # [b] float64: sum_i gamma^i r_i over the steps taken
    next_obs: np.ndarray  # [b, obs_dim] the observation after the last step taken
    next_mask: np.ndarray | None  # [b, mask_dim] legal actions there
    terminated: np.ndarray  # [b] bool: the last step taken ended the agent's episode for good
    truncated: np.ndarray  # [b] bool
    steps: np.ndarray  # [b] int: transitions folded into the return (1..n)
    discount: np.ndarray  # [b] float64: gamma^steps, the weight of a bootstrap at next_obs


class ReplayBuffer:
    """``capacity`` transitions of agents whose policies share one observation and action space."""

    def __init__(self, capacity: int, obs_dim: int, action_shape: tuple[int, ...] = (),
                 action_dtype: Any = np.int64, mask_dim: int = 0):
        if capacity < 1:
            raise ValueError(f"replay capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.action = np.zeros((capacity, *action_shape), action_dtype)
        self.reward = np.zeros(capacity, np.float64)
        self.terminated = np.zeros(capacity, bool)
        self.truncated = np.zeros(capacity, bool)
        self.mask = np.ones((capacity, mask_dim), bool) if mask_dim else None
        self.next_mask = np.ones((capacity, mask_dim), bool) if mask_dim else None
        self.serial = np.full(capacity, -1, np.int64)  # which added row sits here (0, 1, ...)
        self.next = np.full(capacity, -1, np.int64)  # serial of the stream's next row, or -1
        self.added = 0  # rows ever added
        self.streams: dict[str, np.ndarray] = {}  # source -> [copies, slots] serial of last row

    def __len__(self) -> int:
        return min(self.added, self.capacity)

    # -- adding ---------------------------------------------------------------------------
    def add(self, t: Transitions, source: str = "") -> None:
        """Store one step's closed transitions of ``source`` (a policy id, say)."""
        n = len(t)
        if n == 0:
            return
        if n > self.capacity:
            raise ValueError(f"cannot add {n} transitions at once to a buffer of {self.capacity}")
        stream = t.env.astype(np.int64) * (int(t.slot.max()) + 1) + t.slot
        if len(np.unique(stream)) < n:  # several rows of one stream (a whole episode, say)
            order = np.argsort(stream, kind="stable")
            ranked = stream[order]
            starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
            rank = np.empty(n, np.int64)  # 0 for a stream's first row in the batch, 1, ...
            rank[order] = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
            for r in range(int(rank.max()) + 1):  # in order, one row per stream at a time
                self.add(t.select(rank == r), source)
            return
        serials = self.added + np.arange(n)
        pos = serials % self.capacity
        self.obs[pos] = t.obs
        self.next_obs[pos] = t.next_obs
        self.action[pos] = t.action
        self.reward[pos] = t.reward
        self.terminated[pos] = t.terminated
        self.truncated[pos] = t.truncated
        if self.mask is not None:
            self.mask[pos] = True if t.mask is None else t.mask
            self.next_mask[pos] = True if t.next_mask is None else t.next_mask
        self.serial[pos] = serials
        self.next[pos] = -1
        self.added += n

        last = self._stream_table(source, int(t.env.max()) + 1, int(t.slot.max()) + 1)
        prev = last[t.env, t.slot]
        ppos = prev % self.capacity
        linked = (prev >= 0) & (self.serial[ppos] == prev)
        linked &= ~(self.terminated[ppos] | self.truncated[ppos])
        linked &= (self.next_obs[ppos] == t.obs).all(axis=1)
        self.next[ppos[linked]] = serials[linked]
        last[t.env, t.slot] = serials

    def _stream_table(self, source: str, copies: int, slots: int) -> np.ndarray:
        table = self.streams.get(source)
        if table is None or table.shape[0] < copies or table.shape[1] < slots:
            grown = np.full((max(copies, 0 if table is None else table.shape[0]),
                             max(slots, 0 if table is None else table.shape[1])), -1, np.int64)
            if table is not None:
                grown[:table.shape[0], :table.shape[1]] = table
            table = self.streams[source] = grown
        return table

    # -- sampling -------------------------------------------------------------------------
    def sample(self, batch_size: int, rng: np.random.Generator, n_step: int = 1,
               gamma: float = 1.0) -> Sample:
        """``batch_size`` rows drawn uniformly (with replacement), with n-step returns."""
        if len(self) == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        return self.gather(rng.integers(0, len(self), batch_size), n_step, gamma)

    def gather(self, index: np.ndarray, n_step: int = 1, gamma: float = 1.0) -> Sample:
        """The samples starting at rows ``index``, returns folded over up to ``n_step`` rows."""
        end = np.asarray(index, np.int64)
        ret = self.reward[end].copy()
        discount = np.full(len(end), float(gamma))
        steps = np.ones(len(end), np.int64)
        for _ in range(n_step - 1):
            nxt = self.next[end]
            npos = nxt % self.capacity
            ok = (nxt >= 0) & (self.serial[npos] == nxt)
            if not ok.any():
                break
            end = np.where(ok, npos, end)
            ret += np.where(ok, discount * self.reward[end], 0.0)
            discount = np.where(ok, discount * gamma, discount)
            steps += ok
        return Sample(
            index=np.asarray(index), obs=self.obs[index], action=self.action[index],
            mask=None if self.mask is None else self.mask[index], reward=ret,
            next_obs=self.next_obs[end],
            next_mask=None if self.next_mask is None else self.next_mask[end],
            terminated=self.terminated[end], truncated=self.truncated[end], steps=steps,
            discount=discount,
        )

    # -- state ----------------------------------------------------------------------------
    def clear(self) -> None:
        self.serial[:] = -1
        self.next[:] = -1
        self.added = 0
        self.streams = {}

    def state_dict(self) -> dict[str, Any]:
        """The filled rows only, so an early checkpoint stays small."""
        n = len(self)
        arrays = {name: getattr(self, name)[:n].copy() for name in _ARRAYS
                  if getattr(self, name) is not None}
        return {"capacity": self.capacity, "added": self.added, "arrays": arrays,
                "streams": {k: v.copy() for k, v in self.streams.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["capacity"] != self.capacity:
            raise ValueError(f"saved replay buffer holds {state['capacity']} rows, this one "
                             f"{self.capacity}; keep the buffer size when resuming")
        self.clear()
        for name, values in state["arrays"].items():
            getattr(self, name)[:len(values)] = values
        self.added = int(state["added"])
        self.streams = {k: np.array(v) for k, v in state["streams"].items()}


_ARRAYS = ("obs", "next_obs", "action", "reward", "terminated", "truncated", "mask", "next_mask",
           "serial", "next")


"""Rollout storage for on-policy learners: per policy, ``[T, E, k, ...]`` arrays.

E is the env copies, k the policy's agents in their slot order, and T each agent's own time:
the transition at ``[t, e, j]`` is the t-th that agent ``j`` of copy ``e`` closed in this
rollout. An agent's transitions are therefore one contiguous sequence, whether it acts every
step (parallel envs, where T is the runner's step) or on its turns only (turn-based envs),
and whether transitions arrive as they close or a whole episode at a time. ``valid`` marks the
cells that hold a transition (agents that acted less, or left, leave the rest empty); ``first``
marks an agent's first transition of an episode, so a sequence is cut there whatever came
before (an episode that was dropped, say); ``step`` keeps the runner step that closed each one,
to line up agents of one copy in time. Identity is the index ``(t, e, j)``; nothing is ever
matched on the values a row holds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from interplay.run.transitions import Transitions, stream_order, table_of_row_states

_FIELDS = ("obs", "next_obs", "action", "reward", "terminated", "truncated", "mask", "next_mask",
           "step", "first")


@dataclass
class Rollout:
    """One policy's rollout: every array is ``[T, E, k, ...]``."""

    obs: np.ndarray
    next_obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray  # float64
    terminated: np.ndarray
    truncated: np.ndarray
    mask: np.ndarray | None  # legal actions when acting
    next_mask: np.ndarray | None  # legal actions at the next observation
    step: np.ndarray  # the runner step that closed the transition
    first: np.ndarray  # the agent's first transition of its episode
    valid: np.ndarray  # the cell holds a transition
    extras: dict[str, np.ndarray]  # what the actor kept beside each action (log-probs, ...)
    # Where the env keeps a global state: ``states`` ``[M, state_dim]`` holds each (tick, copy)
    # once for the whole rollout, every policy's cells naming their rows of it.
    state: np.ndarray | None = None  # int: the row of ``states`` when the agent acted
    next_state: np.ndarray | None = None  # int: the row of ``states`` at next_obs
    states: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        T, E, k = self.valid.shape
        return T, E, k

    def follows(self) -> np.ndarray:
        """``[T, E, k]``: the cell's transition goes on in the next cell of its sequence (its
        episode did not end there, and the next one is there and not an episode's first)."""
        out = np.zeros_like(self.valid)
        out[:-1] = self.valid[1:] & ~self.first[1:]
        out &= ~(self.terminated | self.truncated)
        return out

    def pieces(self, length: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Cut every agent's sequence into pieces of at most ``length`` cells, a new piece at
        each episode start, so that no piece spans two episodes and an episode no longer
        than ``length`` is one piece. Returns each cell's piece and its offset in it
        (``[T, E, k]``, meaningful where ``valid``), and the number of pieces; pieces are
        numbered by agent, then time."""
        T = self.valid.shape[0]
        starts = np.zeros(self.valid.shape, bool)
        offset = np.zeros(self.valid.shape, np.int64)
        run = np.full(self.valid.shape[1:], length, np.int64)  # cells in the current piece
        for t in range(T):
            new = self.first[t] | (run >= length)
            run = np.where(new, 0, run)
            offset[t] = run
            starts[t] = new & self.valid[t]
            run = run + 1
        order = np.moveaxis(starts, 0, -1)  # by agent, then time
        ids = np.cumsum(order.reshape(-1)).reshape(order.shape) - 1
        return np.moveaxis(ids, -1, 0), offset, int(starts.sum())


class StateTable:
    """The env's global states of one rollout: a row per (tick, copy), however many agents and
    policies name it (see ``Transitions.state_keys``)."""

    def __init__(self) -> None:
        self.rows = np.zeros((0, 0), np.float32)
        self.keys = np.zeros((0, 2), np.int64)
        self.size = 0
        self._row: dict[tuple[int, int], int] = {}

    def add(self, t: Transitions) -> tuple[np.ndarray, np.ndarray]:
        """Keep the states rows ``t`` name that are not here yet; the rows of this table
        holding each row's state when its agent acted, and at its next observation."""
        assert t.states is not None and t.state_keys is not None
        assert t.state is not None and t.next_state is not None
        # the rows' states by key: a batch of several steps names one state in several rows
        named = np.concatenate([t.state, t.next_state])
        unique, first, where = np.unique(t.state_keys[named], axis=0, return_index=True,
                                         return_inverse=True)
        keys = [(int(a), int(b)) for a, b in unique.tolist()]
        rows = np.array([self._row.get(k, -1) for k in keys], np.int64)
        new = np.flatnonzero(rows < 0)
        if len(new):
            self._room(self.size + len(new), t.states.shape[1])
            rows[new] = self.size + np.arange(len(new))
            self.rows[rows[new]] = t.states[named[first[new]]]
            self.keys[rows[new]] = unique[new]
            self._row.update((keys[i], int(rows[i])) for i in new.tolist())
            self.size += len(new)
        n = len(t.state)
        where = where.reshape(-1)
        return rows[where[:n]], rows[where[n:]]

    def _room(self, size: int, dim: int) -> None:
        if size <= len(self.rows) and self.rows.shape[1] == dim:
            return
        grown = np.zeros((max(size, 2 * len(self.rows), 64), dim), np.float32)
        keys = np.zeros((len(grown), 2), np.int64)
        if self.size:
            grown[:self.size], keys[:self.size] = self.rows[:self.size], self.keys[:self.size]
        self.rows, self.keys = grown, keys

    def clear(self) -> None:
        self.size = 0
        self._row = {}

    @property
    def nbytes(self) -> int:
        """What the states held now take (the table's room for more aside)."""
        return self.size * self.rows.shape[1] * self.rows.itemsize


class RolloutStorage:
    saved = True  # an on-policy update needs the whole rollout: resuming without it is not exact

    def __init__(self, agents: dict[str, int], num_envs: int, steps_hint: int = 8):
        self.agents = dict(agents)  # policy id -> k
        self.num_envs = num_envs
        self.hint = max(1, steps_hint)
        self.steps = 0  # steps of the copies since the last update
        self._arrays: dict[str, dict[str, Any]] = {}
        self._count: dict[str, np.ndarray] = {}
        self.states = StateTable()  # every policy's, one table
        self.clear()

    def add(self, pid: str, batch: Transitions) -> None:
        """Put each transition at the next free time of its agent's sequence."""
        if pid not in self.agents or not len(batch):
            return
        k = self.agents[pid]
        count = self._count[pid]
        if batch.grid is not None and tuple(batch.grid[1:]) == count.shape \
                and count.min() == count.max():
            self._add_slices(pid, batch)
            return
        stream = batch.env.astype(np.int64) * k + batch.slot
        t = count[batch.env, batch.slot] + stream_order(stream)[1]
        arrays = self._room(pid, batch, int(t.max()) + 1)
        e, j = batch.env, batch.slot
        for name in _FIELDS:
            value = getattr(batch, name)
            if value is not None and arrays[name] is not None:
                arrays[name][t, e, j] = value
        for name, value in batch.extras.items():
            store = arrays["extras"].get(name)
            if store is None:
                cap = arrays["obs"].shape[0]
                store = arrays["extras"][name] = np.zeros(
                    (cap, self.num_envs, k, *value.shape[1:]), value.dtype)
            store[t, e, j] = value
        if batch.states is not None:
            arrays["state"][t, e, j], arrays["next_state"][t, e, j] = self.states.add(batch)
        arrays["valid"][t, e, j] = True
        np.add.at(count, (e, j), 1)

    def _add_slices(self, pid: str, batch: Transitions) -> None:
        """Whole ``[E, k]`` slices where every agent's sequence is as long: ``buf[t] = slice``."""
        assert batch.grid is not None
        T, E, k = batch.grid
        count = self._count[pid]
        t0 = int(count[0, 0])
        arrays = self._room(pid, batch, t0 + T)
        at = slice(t0, t0 + T)

        def block(x: np.ndarray) -> np.ndarray:
            return x.reshape(T, E, k, *x.shape[1:])

        for name in _FIELDS:
            value = getattr(batch, name)
            if value is not None and arrays[name] is not None:
                arrays[name][at] = block(value)
        for name, value in batch.extras.items():
            store = arrays["extras"].get(name)
            if store is None:
                store = arrays["extras"][name] = np.zeros(
                    (arrays["obs"].shape[0], E, k, *value.shape[1:]), value.dtype)
            store[at] = block(value)
        if batch.states is not None:
            state, next_state = self.states.add(batch)
            arrays["state"][at], arrays["next_state"][at] = block(state), block(next_state)
        arrays["valid"][at] = True
        count += T

    def _room(self, pid: str, batch: Transitions, length: int) -> dict[str, Any]:
        """The policy's arrays, made or grown so that ``length`` times fit."""
        arrays = self._arrays.get(pid)
        cap = 0 if arrays is None else arrays["valid"].shape[0]
        if length <= cap and arrays is not None:
            return arrays
        new_cap = max(length, 2 * cap, self.hint)
        shape = (new_cap, self.num_envs, self.agents[pid])

        def like(x: np.ndarray | None) -> np.ndarray | None:
            return None if x is None else np.zeros((*shape, *x.shape[1:]), x.dtype)

        grown: dict[str, Any] = {name: like(getattr(batch, name)) for name in _FIELDS}
        if grown["first"] is None:
            grown["first"] = np.zeros(shape, bool)
        grown["valid"] = np.zeros(shape, bool)
        for name in ("state", "next_state"):
            grown[name] = np.zeros(shape, np.int64) if batch.states is not None else None
        grown["extras"] = {name: like(v) for name, v in batch.extras.items()}
        if arrays is not None:
            for name, old in arrays.items():
                if name == "extras":
                    for x, v in old.items():
                        if x not in grown["extras"]:
                            grown["extras"][x] = np.zeros((*shape, *v.shape[3:]), v.dtype)
                        grown["extras"][x][:cap] = v
                elif old is not None and grown[name] is not None:
                    grown[name][:cap] = old
        self._arrays[pid] = grown
        return grown

    def end_step(self, env_steps: int) -> None:
        self.steps += 1

    def rollout(self, pid: str) -> Rollout | None:
        """``pid``'s transitions in this rollout as ``[T, E, k]`` arrays; None if none."""
        arrays = self._arrays.get(pid)
        T = int(self._count[pid].max(initial=0))
        if arrays is None or T == 0:
            return None
        cut = {name: (None if v is None else v[:T]) for name, v in arrays.items()
               if name != "extras"}
        states = self.states.rows[:self.states.size] if cut["state"] is not None else None
        return Rollout(**cut, extras={x: v[:T] for x, v in arrays["extras"].items()},
                       states=states)

    def batch(self, pid: str) -> Transitions | None:
        """``pid``'s transitions as flat rows in ``(t, e, j)`` order; None if none."""
        r = self.rollout(pid)
        if r is None:
            return None
        t, e, j = np.nonzero(r.valid)

        def rows(x: np.ndarray | None) -> np.ndarray | None:
            return None if x is None else x[t, e, j]

        return Transitions(
            obs=r.obs[t, e, j], action=r.action[t, e, j], reward=r.reward[t, e, j],
            next_obs=r.next_obs[t, e, j], terminated=r.terminated[t, e, j],
            truncated=r.truncated[t, e, j], env=e, slot=j, mask=rows(r.mask),
            next_mask=rows(r.next_mask),
            extras={x: v[t, e, j] for x, v in r.extras.items()}, step=r.step[t, e, j],
            first=r.first[t, e, j], state=rows(r.state), next_state=rows(r.next_state),
            states=r.states,
            state_keys=None if r.states is None else self.states.keys[:self.states.size])

    def clear(self) -> None:
        """The rollout was learned from: start the next one (the arrays are kept for reuse)."""
        for pid, k in self.agents.items():
            self._count[pid] = np.zeros((self.num_envs, k), np.int64)
            arrays = self._arrays.get(pid)
            if arrays is not None:
                arrays["valid"][...] = False
        self.states.clear()
        self.steps = 0

    def state_dict(self) -> dict[str, Any]:
        """The rollout so far; the global states once, beside every policy's rows."""
        parts = {}
        for pid in self.agents:
            b = self.batch(pid)
            if b is not None:
                b = dataclasses.replace(b, states=None, state_keys=None)
            parts[pid] = [] if b is None else [dataclasses.asdict(b)]
        n = self.states.size
        return {"steps": self.steps, "parts": parts,
                "states": {"rows": self.states.rows[:n].copy(),
                           "keys": self.states.keys[:n].copy()}}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        self.clear()
        if state is None:
            return
        table = state.get("states", {})
        for pid, parts in state["parts"].items():
            for b in parts:
                if b.get("state") is not None:
                    b = {**b, "states": table["rows"], "state_keys": table["keys"]}
                self.add(pid, table_of_row_states(Transitions(**b)))
        self.steps = state["steps"]

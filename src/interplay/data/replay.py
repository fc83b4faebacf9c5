"""Replay buffers for the transitions of many agents, independent of any learner.

Rows live in preallocated arrays, written a whole step's batch at a time and overwritten
oldest first. Each row remembers its *stream*: who closed it (a source name, the env copy and
the agent's slot). A row is linked to the next row of its stream when that one arrives and
continues it (the episode did not end in between, and the new row is not the first of an
episode, as after an episode that was dropped), so n-step returns are built at sampling time for any ``n`` and ``gamma``: a
return stops early where the episode ended, where the next row is not here yet, or where it
was overwritten, and bootstraps from wherever it stopped. Rows are linked back to the previous
row of their stream too, and keep the state a recurrent actor acted from, so that sequences
with a burn-in can be drawn (:mod:`interplay.data.sequences`).

:class:`JointReplayBuffer` keeps instead one row per env copy and step holding every group's
agents side by side, for learners whose critics see all agents at once (MADDPG).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from interplay.data.priority import Prioritized
from interplay.data.ram import check_fits, row_bytes
from interplay.errors import ConfigError
from interplay.run.mapping import PolicySpec
from interplay.run.transitions import Transitions, stream_order


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
    weight: np.ndarray | None = None  # [b] importance weights of a prioritised draw


class ReplayBuffer(Prioritized):
    """``capacity`` transitions of agents whose policies share one observation and action space."""

    def __init__(self, capacity: int, obs_dim: int, action_shape: tuple[int, ...] = (),
                 action_dtype: Any = np.int64, mask_dim: int = 0, obs_dtype: Any = np.float32,
                 state_size: int = 0):
        if capacity < 1:
            raise ValueError(f"replay capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.obs = np.zeros((capacity, obs_dim), obs_dtype)
        self.next_obs = np.zeros((capacity, obs_dim), obs_dtype)
        self.action = np.zeros((capacity, *action_shape), action_dtype)
        self.reward = np.zeros(capacity, np.float64)
        self.terminated = np.zeros(capacity, bool)
        self.truncated = np.zeros(capacity, bool)
        self.mask = np.ones((capacity, mask_dim), bool) if mask_dim else None
        self.next_mask = np.ones((capacity, mask_dim), bool) if mask_dim else None
        self.serial = np.full(capacity, -1, np.int64)  # which added row sits here (0, 1, ...)
        self.next = np.full(capacity, -1, np.int64)  # serial of the stream's next row, or -1
        self.prev = np.full(capacity, -1, np.int64)  # serial of the stream's previous row, or -1
        # A recurrent actor's state when it acted (``extras["state"]``), for sequences.
        self.hidden = np.zeros((capacity, state_size), np.float32) if state_size else None
        self.added = 0  # rows ever added
        self.streams: dict[str, np.ndarray] = {}  # source -> [copies, slots] serial of last row

    def __len__(self) -> int:
        return min(self.added, self.capacity)

    @staticmethod
    def nbytes(capacity: int, obs_dim: int, action_shape: tuple[int, ...] = (),
               action_dtype: Any = np.int64, mask_dim: int = 0, obs_dtype: Any = np.float32,
               state_size: int = 0) -> int:
        """What a buffer of this shape takes, before it is made."""
        return capacity * row_bytes(
            ((2, obs_dim), obs_dtype), (action_shape, action_dtype), ((), np.float64),
            ((2,), bool), ((2, mask_dim), bool), ((3,), np.int64), ((state_size,), np.float32))

    # -- adding ---------------------------------------------------------------------------
    def add(self, t: Transitions, source: str = "") -> None:
        """Store one step's closed transitions of ``source`` (a policy id, say)."""
        n = len(t)
        if n == 0:
            return
        if t.grid is not None:  # whole [E, k] slices: each (copy, slot) once per slice
            if t.grid[0] > 1:
                for part in t.slices():
                    self.add(part, source)
                return
            copies, slots = t.grid[1], t.grid[2]
        else:
            copies, slots = int(t.env.max()) + 1, int(t.slot.max()) + 1
            stream = t.env.astype(np.int64) * slots + t.slot
            if len(np.unique(stream)) < n:  # several rows of one stream (a whole episode, say)
                rank = stream_order(stream)[1]  # 0 for a stream's first row in the batch, 1, ...
                for r in range(int(rank.max()) + 1):  # in order, one row per stream at a time
                    self.add(t.select(rank == r), source)
                return
        if n > self.capacity:  # more streams than rows: the newest overwrite the oldest
            for start in range(0, n, self.capacity):
                part = np.zeros(n, bool)
                part[start:start + self.capacity] = True
                self.add(t.select(part), source)
            return
        serials = self.added + np.arange(n)
        pos = serials % self.capacity
        self.obs[pos] = t.obs
        self.next_obs[pos] = t.next_obs
        self.action[pos] = t.action
        self.reward[pos] = t.reward
        self.terminated[pos] = t.terminated
        self.truncated[pos] = t.truncated
        if self.mask is not None and self.next_mask is not None:
            self.mask[pos] = True if t.mask is None else t.mask
            self.next_mask[pos] = True if t.next_mask is None else t.next_mask
        if self.hidden is not None:
            self.hidden[pos] = recurrent_state(t.extras, n, self.hidden.shape[1])
        self.serial[pos] = serials
        self.next[pos] = -1
        self.prev[pos] = -1
        self.added += n
        self._priorities_added(pos)

        last = self._stream_table(source, copies, slots)
        prev = last[t.env, t.slot]
        ppos = prev % self.capacity
        linked = (prev >= 0) & (self.serial[ppos] == prev)
        linked &= ~(self.terminated[ppos] | self.truncated[ppos])
        if t.first is not None:  # a row that starts an episode follows none (a dropped one)
            linked &= ~t.first
        self.next[ppos[linked]] = serials[linked]
        self.prev[pos[linked]] = prev[linked]
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
               gamma: float = 1.0, beta: float = 1.0) -> Sample:
        """``batch_size`` rows drawn with replacement (uniformly, or by priority with
        importance weights to the power ``beta``), with n-step returns."""
        index, weight = self.draw(batch_size, rng, beta)
        sample = self.gather(index, n_step, gamma)
        sample.weight = weight
        return sample

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
        self._clear_priorities()
        self.serial[:] = -1
        self.next[:] = -1
        self.prev[:] = -1
        self.added = 0
        self.streams = {}

    def state_dict(self) -> dict[str, Any]:
        """The filled rows only, so an early checkpoint stays small."""
        n = len(self)
        arrays = {name: getattr(self, name)[:n].copy() for name in _ARRAYS
                  if getattr(self, name) is not None}
        return {"capacity": self.capacity, "added": self.added, "arrays": arrays,
                "streams": {k: v.copy() for k, v in self.streams.items()},
                **self._priority_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        _check_capacity(state, self.capacity)
        self.clear()
        for name, values in state["arrays"].items():
            getattr(self, name)[:len(values)] = values
        self.added = int(state["added"])
        self.streams = {k: np.array(v) for k, v in state["streams"].items()}
        self._load_priorities(state)


STATE_GROUP = "__state__"
"""Where :meth:`JointReplayBuffer.join` puts the rows' global state, beside the groups."""
STATE_KEYS = ("state", "next_state")

_ARRAYS = ("obs", "next_obs", "action", "reward", "terminated", "truncated", "mask", "next_mask",
           "serial", "next", "prev", "hidden")


def recurrent_state(extras: dict[str, np.ndarray], n: int, size: int) -> np.ndarray:
    """The recurrent state ``[n, size]`` each of ``n`` transitions was acted from (the actor's
    ``extras["state"]``); refused when the actor kept none of that size."""
    state = extras.get("state")
    if state is None or state.shape[-1] != size:
        got = "none" if state is None else f"one of {state.shape[-1]} numbers"
        raise ValueError(f"a recurrent replay keeps the state of {size} numbers each action was "
                         f"taken from (extras['state']); the actor gave {got}")
    return state.reshape(n, size)


# -- joint rows: every group's agents of one env copy in one step -------------------------------
@dataclass(frozen=True)
class Group:
    """The shape of one group's share of a joint row: ``agents`` agents with these spaces."""

    agents: int
    obs_dim: int
    action_shape: tuple[int, ...] = ()
    action_dtype: Any = np.int64
    mask_dim: int = 0
    obs_dtype: Any = np.float32
    state_size: int = 0  # a recurrent actor's state kept with each agent's transition

    def nbytes(self, capacity: int) -> int:
        """What this group's share of ``capacity`` joint rows takes."""
        return capacity * self.agents * row_bytes(
            ((2, self.obs_dim), self.obs_dtype), (self.action_shape, self.action_dtype),
            ((), np.float64), ((3,), bool), ((2, self.mask_dim), bool),
            ((self.state_size,), np.float32))


@dataclass
class GroupRows:
    """One group's share of sampled joint rows; every array is ``[b, agents, ...]``."""

    obs: np.ndarray
    action: np.ndarray
    mask: np.ndarray | None
    reward: np.ndarray  # float64
    next_obs: np.ndarray
    next_mask: np.ndarray | None
    terminated: np.ndarray
    truncated: np.ndarray
    present: np.ndarray  # bool: the agent closed a transition in that copy and step
    hidden: np.ndarray | None = None  # float32 [..., S]: a recurrent actor's state when acting


class JointReplayBuffer(Prioritized):
    """``capacity`` joint rows: what the agents of several groups did in one env copy and step.

    Each step, :meth:`add` takes the transitions every group (a policy, say) closed, joins them
    by env copy and writes one row per copy that closed any. An agent that closed nothing
    there is marked absent (``present`` false, its columns zero); a learner that needs every
    agent checks ``present``. Rows of one copy are linked in time for n-step returns
    (:meth:`follow`).

    With ``state_dim``, each row also keeps the env's global state at its observations and at
    its next observations (``state``/``next_state``, ``[capacity, state_dim]`` float32, once
    per row however many agents it holds), taken from the transitions (``Transitions.state``).
    """

    def __init__(self, capacity: int, groups: dict[str, Group], state_dim: int = 0):
        if capacity < 1:
            raise ValueError(f"replay capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.groups = dict(groups)
        self.state_dim = state_dim
        self.states: dict[str, np.ndarray] = {
            key: np.zeros((capacity, state_dim), np.float32) for key in STATE_KEYS
        } if state_dim else {}
        self.columns: dict[str, dict[str, np.ndarray]] = {}
        for name, g in self.groups.items():
            k = g.agents
            cols = {
                "obs": np.zeros((capacity, k, g.obs_dim), g.obs_dtype),
                "next_obs": np.zeros((capacity, k, g.obs_dim), g.obs_dtype),
                "action": np.zeros((capacity, k, *g.action_shape), g.action_dtype),
                "reward": np.zeros((capacity, k), np.float64),
                "terminated": np.zeros((capacity, k), bool),
                "truncated": np.zeros((capacity, k), bool),
                "present": np.zeros((capacity, k), bool),
            }
            if g.mask_dim:
                cols["mask"] = np.ones((capacity, k, g.mask_dim), bool)
                cols["next_mask"] = np.ones((capacity, k, g.mask_dim), bool)
            if g.state_size:
                cols["hidden"] = np.zeros((capacity, k, g.state_size), np.float32)
            self.columns[name] = cols
        self.added = 0  # rows ever added
        # Rows of one env copy linked in time order, within an episode, for n-step returns.
        self.serial = np.full(capacity, -1, np.int64)  # which added row sits here (0, 1, ...)
        self.next = np.full(capacity, -1, np.int64)  # serial of the copy's next row, or -1
        self.prev = np.full(capacity, -1, np.int64)  # serial of the copy's previous row, or -1
        self.last = np.full(0, -1, np.int64)  # per env copy: serial of its newest row
        self._starts = np.zeros(0, bool)  # of the rows the last join made

    def __len__(self) -> int:
        return min(self.added, self.capacity)

    def join(self, batches: dict[str, Transitions]) -> tuple[np.ndarray, dict[str, dict[str, np.ndarray]]]:
        """Joint rows, one per (runner step, env copy) in which anything closed, in time order:
        each row's env copy and each group's columns ``[rows, agents, ...]``, not stored yet.
        The batches may cover many steps (whole episodes handed over at their end).

        A transition's (step, copy, slot) is where it sits in its group's block: the steps the
        batches span by the copies, by the group's agents. The joint rows are that block's
        (step, copy) cells that hold anything, so each is written straight to its place."""
        unknown = [name for name in batches if name not in self.groups]
        if unknown:
            raise ValueError(f"joint replay buffer has no group {unknown[0]!r}; "
                             f"groups are {list(self.groups)}")
        cells = _Cells([t for t in batches.values() if len(t)])
        n = cells.rows
        starts = np.zeros(n, bool)  # a row in which some agent began its episode
        out: dict[str, dict[str, np.ndarray]] = {}
        if self.state_dim:  # every agent of a row carries the same state: any one will do
            states = {key: np.zeros((n, self.state_dim), np.float32) for key in STATE_KEYS}
            for name, part in batches.items():
                if not len(part):
                    continue
                if part.states is None:
                    raise ValueError(f"group {name!r}: transitions carry no global state; this "
                                     "buffer keeps the env's global state with each row")
                at = cells.row(part)
                for key, rows in zip(STATE_KEYS, part.state_rows(), strict=True):
                    states[key][at] = rows
            out[STATE_GROUP] = states
        for name, g in self.groups.items():
            cols = {key: np.zeros((n, *col.shape[1:]), col.dtype)
                    for key, col in self.columns[name].items()}
            for key in ("mask", "next_mask"):
                if key in cols:
                    cols[key][:] = True
            t = batches.get(name)
            if t is not None and len(t):
                row = cells.row(t)
                _check_slots(name, g.agents, row, t.slot, n)
                where = (row, t.slot)
                cols["obs"][where] = t.obs
                cols["next_obs"][where] = t.next_obs
                cols["action"][where] = t.action
                cols["reward"][where] = t.reward
                cols["terminated"][where] = t.terminated
                cols["truncated"][where] = t.truncated
                cols["present"][where] = True
                if t.first is not None:
                    starts[row] |= t.first
                if g.state_size:
                    cols["hidden"][where] = recurrent_state(t.extras, len(t), g.state_size)
                if g.mask_dim:
                    if t.mask is not None:
                        cols["mask"][where] = t.mask
                    if t.next_mask is not None:
                        cols["next_mask"][where] = t.next_mask
            out[name] = cols
        self._starts = starts
        return cells.copies, out

    def add(self, joined: dict[str, dict[str, np.ndarray]], copies: np.ndarray | None = None,
            starts: np.ndarray | None = None) -> None:
        """Store rows made by :meth:`join` (the oldest rows go first). With their env
        ``copies`` (and the rows that ``starts`` an episode), each row is linked to the next
        row of its copy in the same episode, for :meth:`follow`."""
        n = len(next(iter(self.groups_of(joined).values()))["present"]) if joined else 0
        if n == 0:
            return
        if n > self.capacity:  # more rows than room: the newest overwrite the oldest
            for start in range(0, n, self.capacity):
                part = slice(start, start + self.capacity)
                self.add({name: {key: col[part] for key, col in cols.items()}
                          for name, cols in joined.items()},
                         None if copies is None else copies[part],
                         None if starts is None else starts[part])
            return
        serials = self.added + np.arange(n)
        pos = serials % self.capacity
        for name, cols in joined.items():
            target = self.states if name == STATE_GROUP else self.columns[name]
            for key, values in cols.items():
                target[key][pos] = values
        self.serial[pos] = serials
        self.next[pos] = -1
        self.prev[pos] = -1
        self.added += n
        self._priorities_added(pos)
        if copies is not None:
            self._link(np.asarray(copies, np.int64), serials,
                       np.zeros(n, bool) if starts is None else np.asarray(starts, bool))

    def _link(self, copies: np.ndarray, serials: np.ndarray, starts: np.ndarray) -> None:
        if len(self.last) <= int(copies.max()):
            self.last = np.concatenate([self.last, np.full(int(copies.max()) + 1 - len(self.last),
                                                           -1, np.int64)])
        rank = stream_order(copies)[1]
        for r in range(int(rank.max()) + 1):  # a copy's rows one at a time, in time order
            now = rank == r
            c, serial = copies[now], serials[now]
            prev = self.last[c]
            ppos = prev % self.capacity
            linked = (prev >= 0) & (self.serial[ppos] == prev) & ~starts[now]
            linked &= ~self.episode_ended(ppos)
            self.next[ppos[linked]] = serial[linked]
            self.prev[serial[linked] % self.capacity] = prev[linked]
            self.last[c] = serial

    @staticmethod
    def groups_of(joined: dict[str, dict[str, np.ndarray]]) -> dict[str, dict[str, np.ndarray]]:
        """The groups' columns of rows made by :meth:`join` (without the global state)."""
        return {name: cols for name, cols in joined.items() if name != STATE_GROUP}

    def state_rows(self, pos: np.ndarray, key: str = "state") -> np.ndarray:
        """The global state (``state`` or ``next_state``) of the rows at ``pos``."""
        if not self.state_dim:
            raise ValueError("this joint replay buffer keeps no global state")
        return self.states[key][pos]

    def episode_ended(self, pos: np.ndarray) -> np.ndarray:
        """Whether no agent present in the rows at ``pos`` goes on in its episode."""
        goes_on = np.zeros(len(pos), bool)
        for cols in self.columns.values():
            done = cols["terminated"][pos] | cols["truncated"][pos]
            goes_on |= (cols["present"][pos] & ~done).any(axis=1)
        return ~goes_on

    def follow(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows after those at ``pos`` in their copy's episode, and which have one."""
        nxt = self.next[pos]
        npos = nxt % self.capacity
        ok = (nxt >= 0) & (self.serial[npos] == nxt)
        return np.where(ok, npos, pos), ok

    def sample(self, batch_size: int, rng: np.random.Generator, beta: float = 1.0
               ) -> tuple[np.ndarray, dict[str, GroupRows], np.ndarray | None]:
        """``batch_size`` rows drawn with replacement (uniformly, or by priority): their
        indices, contents and importance weights (None when uniform)."""
        index, weight = self.draw(batch_size, rng, beta)
        return index, self.gather(index), weight

    def gather(self, index: np.ndarray) -> dict[str, GroupRows]:
        """The groups' shares of the rows at ``index`` (any shape: ``[L, B]`` windows too)."""
        return {name: GroupRows(**{key: cols[key][index] if key in cols else None
                                   for key in GroupRows.__dataclass_fields__})
                for name, cols in self.columns.items()}

    # -- state ----------------------------------------------------------------------------
    def clear(self) -> None:
        self._clear_priorities()
        self.added = 0
        self.serial[:] = -1
        self.next[:] = -1
        self.prev[:] = -1
        self.last = np.full(0, -1, np.int64)

    def state_dict(self) -> dict[str, Any]:
        """The filled rows only, so an early checkpoint stays small."""
        n = len(self)
        out = {"capacity": self.capacity, "added": self.added,
               "columns": {name: {key: col[:n].copy() for key, col in cols.items()}
                           for name, cols in self.columns.items()},
               "links": {"serial": self.serial[:n].copy(), "next": self.next[:n].copy(),
                         "prev": self.prev[:n].copy(), "last": self.last.copy()},
               **self._priority_state()}
        if self.state_dim:
            out["states"] = {key: col[:n].copy() for key, col in self.states.items()}
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        _check_capacity(state, self.capacity)
        self.clear()
        for name, cols in state["columns"].items():
            for key, values in cols.items():
                self.columns[name][key][:len(values)] = values
        saved = state.get("states")
        if bool(saved) != bool(self.state_dim) or (
                saved and saved["state"].shape[1:] != (self.state_dim,)):
            def holds(states: Any) -> str:
                return (f"a global state of {states['state'].shape[1]} numbers" if states
                        else "no global state")
            raise ValueError(
                f"the saved joint replay buffer holds {holds(saved)} with each row, this one "
                f"{holds(self.states)}; keep algo.state and the env when resuming")
        for key, values in (saved or {}).items():
            self.states[key][:len(values)] = values
        self.added = int(state["added"])
        links = state.get("links")
        if links is not None:
            self.serial[:len(links["serial"])] = links["serial"]
            self.next[:len(links["next"])] = links["next"]
            if "prev" in links:
                self.prev[:len(links["prev"])] = links["prev"]
            self.last = np.array(links["last"], np.int64)
        self._load_priorities(state)


class _Cells:
    """The (runner step, env copy) cells that the transitions of one join close in: each held
    cell is a joint row, numbered in time order (step, then copy)."""

    def __init__(self, filled: list[Transitions]):
        self.width = max((int(t.env.max()) + 1 for t in filled), default=1)  # copies
        self.first = min((int(t.step.min()) for t in filled), default=0)
        last = max((int(t.step.max()) for t in filled), default=self.first - 1)
        held = np.zeros((last - self.first + 1) * self.width, bool)
        for t in filled:
            held[self._cell(t)] = True
        self._row_of = np.cumsum(held) - 1  # a held cell's row
        cells = np.flatnonzero(held)
        self.rows = len(cells)
        self.copies = cells % self.width

    def _cell(self, t: Transitions) -> np.ndarray:
        return (t.step.astype(np.int64) - self.first) * self.width + t.env

    def row(self, t: Transitions) -> np.ndarray:
        """The joint row each of ``t``'s transitions belongs in."""
        return self._row_of[self._cell(t)]


def _check_slots(group: str, agents: int, row: np.ndarray, slot: np.ndarray, rows: int) -> None:
    """Refuse a slot outside the group, or two transitions of one agent in one joint row."""
    if int(slot.max()) >= agents:
        raise ValueError(f"group {group!r} has {agents} agents; a transition "
                         f"names slot {int(slot.max())}")
    if np.bincount(row * agents + slot, minlength=rows * agents).max() > 1:
        raise ValueError(f"group {group!r}: an agent closed two transitions in one "
                         "copy and step; joint rows hold one per agent")


def _check_capacity(state: dict[str, Any], capacity: int) -> None:
    if state["capacity"] != capacity:
        raise ValueError(f"saved replay buffer holds {state['capacity']} rows, this one "
                         f"{capacity}; keep the buffer size when resuming")


# -- storages the loop owns ---------------------------------------------------------------------
def policy_replay(specs: dict[str, PolicySpec], capacity: int, saved: bool = True,
                  priority: tuple[float, float] | None = None,
                  state_sizes: dict[str, int] | None = None) -> PolicyReplay:
    """A replay buffer of ``capacity`` transitions for each policy in ``specs``, refused before
    it is allocated when the machine cannot hold them all; prioritised by ``(alpha, eps)``.
    ``state_sizes``: the recurrent state each policy's actor acts from, kept with each row."""
    sizes = state_sizes or {}
    shapes = {pid: (capacity, spec.obs_dim, spec.action_view.shape, spec.action_view.dtype,
                    spec.action_view.mask_dim, spec.obs_view.dtype, sizes.get(pid, 0))
              for pid, spec in specs.items()}
    check_fits(sum(ReplayBuffer.nbytes(*shape) for shape in shapes.values()), "algo.buffer_size",
               f"{len(shapes)} replay buffer(s) of {capacity:,} transitions")
    buffers = {pid: ReplayBuffer(*shape) for pid, shape in shapes.items()}
    if priority is not None:
        for buffer in buffers.values():
            buffer.prioritize(*priority)
    return PolicyReplay(buffers, saved=saved)


def joint_replay(specs: dict[str, PolicySpec], capacity: int, requires: str, state_dim: int = 0,
                 saved: bool = True, priority: tuple[float, float] | None = None,
                 absent_ok: bool = False, state_sizes: dict[str, int] | None = None
                 ) -> JointReplay:
    """A joint replay buffer of ``capacity`` rows of the agents of every policy in ``specs``
    (and the env's global state of ``state_dim`` numbers, twice, with each row), refused
    before it is allocated when the machine cannot hold it; prioritised by ``(alpha, eps)``.
    ``requires`` names who needs joint rows, in errors. ``state_sizes``: the recurrent state
    each policy's actor acts from, kept with each agent's share of a row."""
    sizes = state_sizes or {}
    groups = {pid: Group(len(spec.agents), spec.obs_dim, spec.action_view.shape,
                         spec.action_view.dtype, spec.action_view.mask_dim, spec.obs_view.dtype,
                         sizes.get(pid, 0))
              for pid, spec in specs.items()}
    agents = sum(g.agents for g in groups.values())
    states = len(STATE_KEYS) * np.dtype(np.float32).itemsize * state_dim * capacity
    check_fits(sum(g.nbytes(capacity) for g in groups.values()) + states, "algo.buffer_size",
               f"a joint replay buffer of {capacity:,} steps of {agents} agents"
               + (f" and the env's state of {state_dim:,} numbers" if state_dim else ""))
    buffer = JointReplayBuffer(capacity, groups, state_dim)
    if priority is not None:
        buffer.prioritize(*priority)
    return JointReplay(buffer, requires, {pid: spec.agents for pid, spec in specs.items()},
                       saved=saved, absent_ok=absent_ok)


class PolicyReplay:
    """A replay buffer per policy, each holding its agents' transitions as they close."""

    def __init__(self, buffers: dict[str, ReplayBuffer], saved: bool = True):
        self.buffers = buffers
        self.saved = saved

    def add(self, pid: str, batch: Transitions) -> None:
        if pid in self.buffers and len(batch):
            self.buffers[pid].add(batch, pid)

    def holds(self, n: int) -> bool:
        """Whether some policy's buffer holds a batch of ``n``."""
        return any(len(b) >= n for b in self.buffers.values())

    def end_step(self, env_steps: int) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {pid: b.state_dict() for pid, b in self.buffers.items()}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        for pid, b in self.buffers.items():
            if state is None:
                b.clear()
            else:
                b.load_state_dict(state[pid])


class AbsentAgentError(ConfigError):
    """Joint rows need every agent of a group, and one closed nothing while others did."""


class JointReplay:
    """One joint row per env copy and step, holding every policy's agents side by side.

    The transitions of one step of the copies are joined when the step ends. Every agent of
    every group must have closed a transition in each copy that closed any (``requires`` says
    who needs that, in the error): a turn-based env, or agents that leave or join, are refused
    at the first such step.
    """

    def __init__(self, buffer: JointReplayBuffer, requires: str,
                 agents: dict[str, tuple[str, ...]], saved: bool = True,
                 absent_ok: bool = False):
        self.buffer = buffer
        self.requires = requires
        self.absent_ok = absent_ok  # rows may miss agents (that died, or had not joined)
        self.agents = agents  # agent ids per group, for errors
        self.saved = saved
        self._step: dict[str, Transitions] = {}

    def __len__(self) -> int:
        return len(self.buffer)

    def holds(self, n: int) -> bool:
        """Whether the buffer holds a batch of ``n`` joint rows."""
        return len(self.buffer) >= n

    def add(self, pid: str, batch: Transitions) -> None:
        if pid in self.buffer.groups and len(batch):
            self._step[pid] = batch

    def end_step(self, env_steps: int) -> None:
        batches, self._step = self._step, {}
        if not batches:
            return
        copies, joined = self.buffer.join(batches)
        starts = self.buffer._starts
        for pid, cols in ({} if self.absent_ok else self.buffer.groups_of(joined)).items():
            absent = np.argwhere(~cols["present"])
            if len(absent):
                row, slot = absent[0]
                raise AbsentAgentError(
                    f"{self.requires} needs every trained agent to act in every step, but "
                    f"agent {self.agents[pid][slot]!r} (policy {pid!r}) closed no transition in env copy "
                    f"{copies[row]} at env step {env_steps} while others did (turn-based env, "
                    "or agents that leave or join); use ippo or mappo for this env")
        self.buffer.add(joined, copies, starts)

    def state_dict(self) -> dict[str, Any]:
        return self.buffer.state_dict()

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        self._step = {}
        if state is None:
            self.buffer.clear()
        else:
            self.buffer.load_state_dict(state)

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

from interplay.run.transitions import Transitions, stream_order

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


class RolloutStorage:
    saved = True  # an on-policy update needs the whole rollout: resuming without it is not exact

    def __init__(self, agents: dict[str, int], num_envs: int, steps_hint: int = 8):
        self.agents = dict(agents)  # policy id -> k
        self.num_envs = num_envs
        self.hint = max(1, steps_hint)
        self.steps = 0  # steps of the copies since the last update
        self._arrays: dict[str, dict[str, Any]] = {}
        self._count: dict[str, np.ndarray] = {}
        self.clear()

    def add(self, pid: str, batch: Transitions) -> None:
        """Put each transition at the next free time of its agent's sequence."""
        if pid not in self.agents or not len(batch):
            return
        k = self.agents[pid]
        count = self._count[pid]
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
        arrays["valid"][t, e, j] = True
        np.add.at(count, (e, j), 1)

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
        return Rollout(**cut, extras={x: v[:T] for x, v in arrays["extras"].items()})

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
            first=r.first[t, e, j])

    def clear(self) -> None:
        """The rollout was learned from: start the next one (the arrays are kept for reuse)."""
        for pid, k in self.agents.items():
            self._count[pid] = np.zeros((self.num_envs, k), np.int64)
            arrays = self._arrays.get(pid)
            if arrays is not None:
                arrays["valid"][...] = False
        self.steps = 0

    def state_dict(self) -> dict[str, Any]:
        parts = {}
        for pid in self.agents:
            b = self.batch(pid)
            parts[pid] = [] if b is None else [dataclasses.asdict(b)]
        return {"steps": self.steps, "parts": parts}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        self.clear()
        if state is None:
            return
        for pid, parts in state["parts"].items():
            for b in parts:
                self.add(pid, Transitions(**b))
        self.steps = state["steps"]

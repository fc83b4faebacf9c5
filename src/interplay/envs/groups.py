"""Policy groups' ``[E, k, ...]`` blocks of a vector env's step.

Once the policy specs exist, the runner tells the vector env which agents each policy group
holds (``VecEnv.group``); from then on every step the env returns carries, per group, its
observations, masks, rewards, flags and who acts as ``[E, k, ...]`` arrays
(``VecStep.groups[pid]``), in the group's slot order.

The env's buffers keep agents of one width and dtype side by side in one block (see
:func:`~interplay.envs.batch.agent_blocks`), so a group whose agents sit next to each other
there is a view of that block, made once and never copied. A group laid out otherwise (its
agents interleaved with another group's) is gathered with one indexed copy per block per step;
only per-agent arrays in no known block are stacked agent by agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


class _Block:
    """One group's ``[E, k, ...]`` array over per-agent ``[E, ...]`` arrays."""

    def __init__(self, arrays: Mapping[str, np.ndarray | None], agents: tuple[str, ...]):
        self.arrays, self.agents = arrays, agents
        self.array: np.ndarray | None = None
        self.fixed = True  # ``array`` is a view that follows the env's buffers by itself
        self._block: np.ndarray | None = None
        self._index: np.ndarray | None = None
        first = arrays[agents[0]]
        if first is None:  # no such array (no masks for this space)
            return
        place: dict[str, tuple[np.ndarray, int]] = getattr(arrays, "place", {})
        spots = [place[a] for a in agents if a in place]
        if len(spots) == len(agents) and len({id(b) for b, _ in spots}) == 1:
            block = spots[0][0]
            cols = np.array([j for _, j in spots], np.intp)
            if (np.diff(cols) == 1).all():
                self.array = block[:, int(cols[0]):int(cols[-1]) + 1]
                return
            self._block, self._index = block, cols
            self.array = np.empty((block.shape[0], len(cols), *block.shape[2:]), block.dtype)
        else:
            self.array = np.empty((first.shape[0], len(agents), *first.shape[1:]), first.dtype)
        self.fixed = False
        self.refresh()

    def refresh(self) -> None:
        """Copy the latest values in, where ``array`` is not a view."""
        if self.fixed:
            return
        if self._block is not None:
            np.take(self._block, self._index, axis=1, out=self.array)
        else:
            np.stack([self.arrays[a] for a in self.agents], axis=1, out=self.array)


class _Columns:
    """One group's ``[E, k]`` columns of an ``[E, A]`` array: a view where they are adjacent."""

    def __init__(self, array: np.ndarray, cols: np.ndarray):
        self.source, self.cols = array, cols
        self.fixed = bool(len(cols)) and bool((np.diff(cols) == 1).all())
        self.array = (array[:, int(cols[0]):int(cols[-1]) + 1] if self.fixed
                      else array[:, cols])

    def refresh(self) -> None:
        if not self.fixed:
            np.take(self.source, self.cols, axis=1, out=self.array)


@dataclass(slots=True)
class GroupStep:
    """One policy group's share of a step; every array is ``[E, k, ...]`` in slot order.

    Read these between one step and the next: the env writes the next step into them."""

    obs: np.ndarray
    mask: np.ndarray | None  # None where the group's action space has no mask
    acting: np.ndarray  # bool: the agent acts now (its live mask)
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_obs: np.ndarray  # meaningful where terminated or truncated
    final_mask: np.ndarray | None


class GroupBlocks:
    """Every group's :class:`GroupStep` over one vector env's step buffers.

    ``refresh`` after each write brings the copied blocks up to date (views need nothing);
    the final observations only when some flag is set."""

    def __init__(self, step: Any, agents: list[str], groups: dict[str, tuple[str, ...]]):
        col = {a: i for i, a in enumerate(agents)}
        self.members = dict(groups)
        self.groups: dict[str, GroupStep] = {}
        self._now: list[_Block | _Columns] = []
        self._final: list[_Block] = []
        for pid, members in groups.items():
            members = tuple(members)
            cols = np.array([col[a] for a in members], np.intp)
            now = [_Block(step.obs, members), _Block(step.mask, members)]
            flat = [_Columns(getattr(step, name), cols)
                    for name in ("acting", "reward", "terminated", "truncated")]
            final = [_Block(step.final_obs, members), _Block(step.final_mask, members)]
            self._now += [b for b in now if not b.fixed] + [c for c in flat if not c.fixed]
            self._final += [b for b in final if not b.fixed]
            self.groups[pid] = GroupStep(
                obs=now[0].array, mask=now[1].array, acting=flat[0].array, reward=flat[1].array,
                terminated=flat[2].array, truncated=flat[3].array, final_obs=final[0].array,
                final_mask=final[1].array)
        # Every block a view of the buffers (each group's agents side by side): nothing to copy
        self.views = not (self._now or self._final)

    def refresh(self, flagged: bool = True) -> None:
        for block in self._now:
            block.refresh()
        if flagged:
            for final in self._final:
                final.refresh()

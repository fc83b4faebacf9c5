"""What every natively batched env shares: argument checks, output buffers and autoreset."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from interplay.envs.batch import VecStep, agent_blocks, group_blocks
from interplay.envs.groups import GroupBlocks
from interplay.envs.spaces import action_view, obs_view


def check_kwargs(task: str, given: dict[str, Any], accepted: dict[str, Any]) -> dict[str, Any]:
    """``accepted`` (names -> defaults) updated with ``given``; unknown names are an error."""
    unknown = sorted(set(given) - set(accepted))
    if unknown:
        raise TypeError(
            f"native env {task!r} got unknown argument(s) {', '.join(map(repr, unknown))}; "
            f"it accepts num_envs, max_steps, {', '.join(accepted)}"
        )
    return {**accepted, **given}


def check_count(task: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"native env {task!r}: {name} must be a positive integer, got {value!r}")
    return int(value)


def check_limit(task: str, name: str, value: Any) -> int | None:
    """A positive count, or None for no limit."""
    return None if value is None else check_count(task, name, value)


def box(dim: int) -> spaces.Box:
    return spaces.Box(low=-np.float32(np.inf), high=np.float32(np.inf), shape=(dim,),
                      dtype=np.float32)


class FrameRecorder:
    """Keeps one copy's frames while it steps (the videos of a run), drawn by ``render_rgb``."""

    _frames: list[tuple[str, np.ndarray]] | None = None  # see record_frames
    _frames_of = 0

    def render_rgb(self, e: int = 0) -> np.ndarray:
        raise NotImplementedError

    def record_frames(self, e: int = 0) -> list[tuple[str, np.ndarray]]:
        """From now on keep copy ``e``'s frames, in the list returned.

        Each entry is ``("start", frame)`` when an episode begins or ``("step", frame)`` after
        a step; the frame of a step that ends an episode is drawn before the copy resets, so
        every episode's final state is kept.
        """
        frames: list[tuple[str, np.ndarray]] = []
        self._frames, self._frames_of = frames, e
        return frames

    def _record(self, kind: str, done: np.ndarray | None = None) -> None:
        """Keep the recorded copy's frame, if recording (and, given ``done``, if it is done)."""
        if self._frames is not None and (done is None or done[self._frames_of]):
            self._frames.append((kind, self.render_rgb(self._frames_of)))


class BlockEnv(FrameRecorder):
    """What the batched envs share: one :class:`VecStep` view over their own arrays, and each
    policy group's ``[E, k, ...]`` blocks over it."""

    agents: list[str]
    _view: VecStep
    _groups: GroupBlocks | None = None

    def _begun(self) -> VecStep:
        """The view once every copy was reset: nothing flagged, the first frame kept."""
        self._started = True
        self._view.flagged = False
        self._record("start")
        if self._groups is not None:
            self._groups.refresh()
        return self._view

    def stats(self) -> dict[str, int]:
        """No faults to count: the arrays are the env."""
        return {}

    def restored(self) -> None:
        """Nothing to rebuild: every array is the env's own data."""

    def current_step(self) -> VecStep:
        """The step the copies are at now (what the last reset/step returned)."""
        if self._groups is not None:  # a snapshot may have been put back since
            self._groups.refresh()
        return self._view

    def group(self, groups: dict[str, tuple[str, ...]]) -> None:
        """Hand each group's ``[E, k, ...]`` blocks in ``VecStep.groups`` from now on."""
        self._groups = group_blocks(self._view, self.agents, self._groups, groups)


class NativeEnv(BlockEnv):
    """Base of the batched envs: every agent acts at every step and episodes have a fixed length.

    A subclass sets ``agents``, ``observation_spaces``, ``action_spaces`` and ``state_space``,
    calls :meth:`_setup`, and implements ``_reset_rows`` (new episodes for some copies),
    ``_advance`` (one step of every copy, writing ``self._reward``), ``_write_obs`` (the
    observations of the current state into ``self._obs``) and ``state``. It may override
    ``_save_final`` when its observations share one buffer. For pictures it lists the discs
    of a copy in ``_bodies``; :meth:`render_rgb` draws them.
    """

    turn_based = False
    snapshot_supported = True
    kept_state: spaces.Space | None = None  # the state is read with ``state()``, not kept

    task = "native"
    agents: list[str]
    observation_spaces: dict[str, spaces.Space]
    action_spaces: dict[str, spaces.Space]
    state_space: spaces.Box

    def _setup(self, num_envs: int, max_steps: int | None, max_cycles: int,
               obs_buffers: dict[str, np.ndarray] | None = None,
               final_buffers: dict[str, np.ndarray] | None = None) -> None:
        E, A = num_envs, len(self.agents)
        self.num_envs = E
        self.max_cycles = max_cycles
        self.max_steps = max_steps
        self.limit = max_cycles if max_steps is None else min(max_steps, max_cycles)
        self.obs_views = {a: obs_view(self.observation_spaces[a], a) for a in self.agents}
        self.action_views = {a: action_view(self.action_spaces[a], a) for a in self.agents}

        # Agents of one width sit side by side in one [E, n, dim] block, so a policy group's
        # [E, k, dim] block is a view (see groups.GroupBlocks).
        dims = {a: self.obs_views[a].dim for a in self.agents}
        mask_dims = {a: self.action_views[a].mask_dim for a in self.agents}
        self._obs = obs_buffers if obs_buffers is not None else agent_blocks(dims, E, np.float32)
        self._final_obs = (final_buffers if final_buffers is not None
                           else agent_blocks(dims, E, np.float32))
        self._mask = agent_blocks(mask_dims, E, bool, fill=True)
        self._final_mask = agent_blocks(mask_dims, E, bool, fill=True)
        self._groups: GroupBlocks | None = None
        self._acting = np.ones((E, A), bool)
        self._reward = np.zeros((E, A), np.float64)
        self._terminated = np.zeros((E, A), bool)
        self._truncated = np.zeros((E, A), bool)
        self._episode_end = np.zeros(E, bool)
        self._t = np.zeros(E, np.int64)
        self._rng = np.random.default_rng()
        self._started = False
        self._view = VecStep(
            obs=self._obs, mask=self._mask, acting=self._acting, reward=self._reward,
            terminated=self._terminated, truncated=self._truncated, final_obs=self._final_obs,
            final_mask=self._final_mask, episode_end=self._episode_end, raw_obs=None, infos=None,
            flagged=False, all_legal=True, all_acting=True,  # every action legal, every agent acts
        )

    # -- subclass hooks -------------------------------------------------------------------
    def _reset_rows(self, rows: np.ndarray | slice) -> None:
        """Start new episodes in copies ``rows`` (an index array, or a slice of all)."""
        raise NotImplementedError

    def _advance(self, actions: dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def _write_obs(self) -> None:
        raise NotImplementedError

    def state(self) -> np.ndarray:
        """The global state of every copy, ``[E, state_dim]``: all observations, concatenated."""
        raise NotImplementedError

    def _save_final(self, rows: np.ndarray | slice) -> None:
        for a in self.agents:
            self._final_obs[a][rows] = self._obs[a][rows]

    def _bodies(self, e: int) -> list[tuple[float, float, float, tuple[float, float, float]]]:
        """Copy ``e``'s discs to draw, bottom first: ``(x, y, radius, (r, g, b) in [0, 1])``."""
        raise NotImplementedError(f"native env {self.task!r} does not draw itself")

    # -- pictures -------------------------------------------------------------------------
    def render_rgb(self, e: int = 0, size: int = 320) -> np.ndarray:
        """Copy ``e`` seen from above: an RGB frame ``[size, size, 3]`` of uint8.

        Each body is a disc on a white ground. The view spans [-1, 1]^2, widened when a body
        strays further, so every body stays in sight.
        """
        bodies = self._bodies(e)
        reach = max([1.0, *(max(abs(x), abs(y)) + r for x, y, r, _ in bodies)])
        centres = (np.arange(size) + 0.5) * (2 * reach / size) - reach  # pixel -> world
        xs, ys = centres[None, :], centres[::-1, None]  # row 0 is the top of the picture
        frame = np.full((size, size, 3), 255, np.uint8)
        for x, y, radius, colour in bodies:
            inside = (xs - x) ** 2 + (ys - y) ** 2 <= radius**2
            frame[inside] = np.round(np.clip(colour, 0.0, 1.0) * 255).astype(np.uint8)
        return frame

    # -- the VecEnv interface -------------------------------------------------------------
    def reset(self, seed: int | None = None) -> VecStep:
        self._rng = np.random.default_rng(seed)
        self._reset_rows(slice(None))
        self._t[:] = 0
        self._clear()
        self._write_obs()
        return self._begun()

    def step(self, actions: dict[str, np.ndarray]) -> VecStep:
        if not self._started:
            raise RuntimeError(f"native env {self.task!r}: call reset() before step()")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise KeyError(f"native env {self.task!r}: no actions for agent(s) {missing}")
        self._clear()
        self._advance(actions)
        self._t += 1
        self._write_obs()
        self._record("step")
        done = self._t >= self.limit
        self._view.flagged = flagged = bool(done.any())
        if flagged:
            rows = slice(None) if done.all() else np.flatnonzero(done)
            self._save_final(rows)
            self._reset_rows(rows)
            self._t[rows] = 0
            self._write_obs()
            self._truncated[rows] = True
            self._episode_end[rows] = True
            self._record("start", done)
        if self._groups is not None:
            self._groups.refresh(flagged)
        return self._view

    def close(self) -> None:
        pass

    def _clear(self) -> None:
        self._reward[:] = 0.0
        self._truncated[:] = False
        self._episode_end[:] = False

    def _check_discrete(self, act: np.ndarray, agents: list[str]) -> None:
        """Raise if an integer action in ``act`` (``[len(agents), E]``, or ``[E]``) is illegal."""
        n = [self.action_spaces[a].n for a in agents]
        if act.min() >= 0 and act.max() < min(n):
            return
        for j, (row, a) in enumerate(zip(act.reshape(len(agents), -1), agents, strict=True)):
            bad = row[(row < 0) | (row >= n[j])]
            if bad.size:
                raise ValueError(
                    f"native env {self.task!r}: action {bad[0]} of agent {a!r} is outside "
                    f"{self.action_spaces[a]}"
                )

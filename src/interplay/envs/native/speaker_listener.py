"""mpe2's ``simple_speaker_listener_v4`` for many copies at once.

A speaker that cannot move sees the colour of the goal landmark (one of three) and says
one of three words (or, with continuous actions, any vector in [0, 1]^3); a listener that
cannot speak sees its velocity, the landmarks relative to itself and the speaker's word,
and moves. Both get minus the squared distance from the listener to the goal landmark.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from interplay.envs.native.base import NativeEnv, box, check_count, check_kwargs, check_limit
from interplay.envs.native.particles import (
    DIM_P,
    MOVE_ACTIONS,
    Particles,
    continuous_move_force,
    discrete_move_force,
    row_count,
    uniform_positions,
)
from interplay.envs.registry import native_env

DIM_C = 3
NUM_LANDMARKS = 3
AGENT_SIZE = 0.075
LANDMARK_SIZE = 0.04
AGENT_COLOR = (0.25, 0.25, 0.25)
LANDMARK_COLORS = np.array([[0.65, 0.15, 0.15], [0.15, 0.65, 0.15], [0.15, 0.15, 0.65]])
_COLORS32 = LANDMARK_COLORS.astype(np.float32)
SPEAKER, LISTENER = "speaker_0", "listener_0"


@native_env
class SpeakerListener(NativeEnv):
    task = "speaker_listener"
    defaults = {"max_cycles": 25, "continuous_actions": False, "dynamic_rescaling": False}

    def __init__(self, num_envs: int, max_steps: int | None = None, **kwargs: Any):
        kw = check_kwargs(self.task, kwargs, self.defaults)
        E = check_count(self.task, "num_envs", num_envs)
        max_cycles = check_count(self.task, "max_cycles", kw["max_cycles"])
        max_steps = check_limit(self.task, "max_steps", max_steps)
        self.continuous_actions = bool(kw["continuous_actions"])
        self.dynamic_rescaling = bool(kw["dynamic_rescaling"])  # affects rendering only

        self.agents = [SPEAKER, LISTENER]
        if self.continuous_actions:
            self.action_spaces = {SPEAKER: spaces.Box(low=0, high=1, shape=(DIM_C,)),
                                  LISTENER: spaces.Box(low=0, high=1, shape=(MOVE_ACTIONS,))}
        else:
            self.action_spaces = {SPEAKER: spaces.Discrete(DIM_C),
                                  LISTENER: spaces.Discrete(MOVE_ACTIONS)}
        listener_dim = DIM_P + DIM_P * NUM_LANDMARKS + DIM_C
        self.observation_spaces = {SPEAKER: box(3), LISTENER: box(listener_dim)}
        self.state_space = box(3 + listener_dim)
        self._setup(E, max_steps, max_cycles)

        self.listener = Particles(E, [AGENT_SIZE], collide=False)
        self.speaker_pos = np.zeros((DIM_P, E))  # the speaker never moves and is never seen
        self.landmarks = np.zeros((NUM_LANDMARKS, DIM_P, E))
        self.goal = np.zeros(E, np.int64)  # index of the goal landmark
        self.goal_pos = np.zeros((DIM_P, E))  # position of the goal landmark
        self.comm = np.zeros((DIM_C, E))  # the speaker's last word
        self._force = np.empty((1, DIM_P, E))
        self._gap = np.empty((DIM_P, E))
        self._words = np.eye(DIM_C)

    # -- dynamics -------------------------------------------------------------------------
    def _reset_rows(self, rows: np.ndarray | slice) -> None:
        # The goal first, then both agents, then the landmarks, as mpe2 draws them.
        rng, E = self._rng, self.num_envs
        self.goal[rows] = rng.integers(NUM_LANDMARKS, size=row_count(E, rows))
        agents = uniform_positions(rng, E, rows, 2)
        self.speaker_pos[:, rows] = agents[0]
        self.listener.pos[:, :, rows] = agents[1:]
        self.listener.vel[:, :, rows] = 0.0
        self.landmarks[:, :, rows] = uniform_positions(rng, E, rows, NUM_LANDMARKS)
        self.comm[:, rows] = 0.0
        self._place_goals(rows)

    def _place_goals(self, rows: np.ndarray | slice) -> None:
        copies = np.arange(self.num_envs)[rows]
        self.goal_pos[:, rows] = self.landmarks[self.goal[copies], :, copies].T

    def _advance(self, actions: dict[str, np.ndarray]) -> None:
        E = self.num_envs
        said, move = actions[SPEAKER], actions[LISTENER]
        if self.continuous_actions:
            said = np.clip(np.asarray(said, np.float32).reshape(E, DIM_C), 0.0, 1.0)
            self.comm[:] = said.T
            move = np.clip(np.asarray(move, np.float32).reshape(1, E, MOVE_ACTIONS), 0.0, 1.0)
            continuous_move_force(move, self._force)
        else:
            said = np.asarray(said, np.int64).reshape(E)
            move = np.asarray(move, np.int64).reshape(1, E)
            self._check_discrete(said, [SPEAKER])
            self._check_discrete(move, [LISTENER])
            np.take(self._words, said, axis=1, out=self.comm, mode="clip")
            discrete_move_force(move, self._force)
        self.listener.step(self._force)
        # Both agents get minus the squared distance from the listener to the goal.
        gap = np.subtract(self.listener.pos[0], self.goal_pos, out=self._gap)
        np.square(gap, out=gap)
        reward = self._reward.T  # [2, E]
        np.add(gap[0], gap[1], out=reward[0])
        np.negative(reward[0], out=reward[0])
        reward[1] = reward[0]

    # -- observations ---------------------------------------------------------------------
    def _obs_into(self, speaker: np.ndarray, listener: np.ndarray) -> None:
        """Write the speaker's ``[E, 3]`` and the listener's ``[E, 11]`` observations."""
        np.take(_COLORS32, self.goal, axis=0, out=speaker, mode="clip")
        out = listener.T  # [11, E]
        out[0:2] = self.listener.vel[0]
        rel = self.landmarks - self.listener.pos  # [3, 2, E]
        out[2:2 + 2 * NUM_LANDMARKS] = rel.reshape(2 * NUM_LANDMARKS, self.num_envs)
        out[2 + 2 * NUM_LANDMARKS:] = self.comm

    def _write_obs(self) -> None:
        self._obs_into(self._obs[SPEAKER], self._obs[LISTENER])

    def state(self) -> np.ndarray:
        out = np.empty((self.num_envs, self.state_space.shape[0]), np.float32)
        self._obs_into(out[:, :3], out[:, 3:])
        return out

    def _bodies(self, e: int) -> list[tuple[float, float, float, tuple[float, float, float]]]:
        """The landmarks, the speaker, and the listener tinted with its goal's colour."""
        landmarks = [(*self.landmarks[i, :, e].tolist(), LANDMARK_SIZE,
                      tuple(LANDMARK_COLORS[i].tolist())) for i in range(NUM_LANDMARKS)]
        listener_color = tuple((LANDMARK_COLORS[self.goal[e]] + 0.45).tolist())
        return [*landmarks, (*self.speaker_pos[:, e].tolist(), AGENT_SIZE, AGENT_COLOR),
                (*self.listener.pos[0, :, e].tolist(), AGENT_SIZE, listener_color)]

    # -- tests and tools ------------------------------------------------------------------
    def set_state_from_mpe(self, e: int, world: Any, steps: int = 0) -> None:
        """Make copy ``e`` hold the state of an mpe2 simple_speaker_listener ``world``.

        ``steps`` is how many steps that episode has already run.
        """
        speaker, listener = world.agents
        self.goal[e] = next(i for i, lm in enumerate(world.landmarks) if lm is speaker.goal_b)
        self.speaker_pos[:, e] = speaker.state.p_pos
        self.listener.pos[0, :, e] = listener.state.p_pos
        self.listener.vel[0, :, e] = listener.state.p_vel
        for i, landmark in enumerate(world.landmarks):
            self.landmarks[i, :, e] = landmark.state.p_pos
        self.comm[:, e] = speaker.state.c
        self._place_goals(np.array([e]))
        self._t[e] = steps
        self._started = True
        self._write_obs()

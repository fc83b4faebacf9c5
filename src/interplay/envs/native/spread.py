"""mpe2's ``simple_spread_v3`` for many copies at once.

N agents (discs of radius 0.15 that collide) and N landmarks start uniformly in [-1, 1]^2.
Every agent gets ``(1 - local_ratio) * global + local_ratio * local``, where ``global`` is
minus the sum over landmarks of the distance to the nearest agent and ``local`` is minus
the number of other agents the agent overlaps. An agent sees
``[vel, pos, landmark - pos (N x 2), other - pos ((N-1) x 2), comm ((N-1) x 2)]``; agents
are silent, so the comm slots are always zero.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from interplay.envs.batch import block_views
from interplay.envs.native.base import NativeEnv, box, check_count, check_kwargs, check_limit
from interplay.envs.native.particles import (
    DIM_P,
    MOVE_ACTIONS,
    Particles,
    continuous_move_force,
    discrete_move_force,
    lengths,
    uniform_positions,
)
from interplay.envs.registry import native_env

AGENT_SIZE = 0.15
LANDMARK_SIZE = 0.05
DIM_C = 2
AGENT_COLOR = (0.35, 0.35, 0.85)
LANDMARK_COLOR = (0.25, 0.25, 0.25)


@native_env
class Spread(NativeEnv):
    task = "spread"
    defaults = {"N": 3, "local_ratio": 0.5, "max_cycles": 25, "continuous_actions": False,
                "dynamic_rescaling": False}

    def __init__(self, num_envs: int, max_steps: int | None = None, **kwargs: Any):
        kw = check_kwargs(self.task, kwargs, self.defaults)
        E = check_count(self.task, "num_envs", num_envs)
        N = check_count(self.task, "N", kw["N"])
        max_cycles = check_count(self.task, "max_cycles", kw["max_cycles"])
        max_steps = check_limit(self.task, "max_steps", max_steps)
        local_ratio = kw["local_ratio"]
        if isinstance(local_ratio, bool) or not isinstance(local_ratio, int | float) \
                or not 0.0 <= local_ratio <= 1.0:
            raise ValueError(
                f"native env 'spread': local_ratio must be a number in [0, 1], got {local_ratio!r}"
            )
        self.N = N
        self.local_ratio = float(local_ratio)
        self.continuous_actions = bool(kw["continuous_actions"])
        self.dynamic_rescaling = bool(kw["dynamic_rescaling"])  # affects rendering only

        self.agents = [f"agent_{i}" for i in range(N)]
        D = self.obs_dim = 4 + 2 * N + 2 * (N - 1) + DIM_C * (N - 1)
        if self.continuous_actions:
            act_space: spaces.Space = spaces.Box(low=0, high=1, shape=(MOVE_ACTIONS,))
        else:
            act_space = spaces.Discrete(MOVE_ACTIONS)
        self.action_spaces = {a: act_space for a in self.agents}
        self.observation_spaces = {a: box(D) for a in self.agents}
        self.state_space = box(N * D)

        # Observations of all agents live in one block [E, N, D]: agent i's is block[:, i], a
        # policy group's a run of its columns (named apart from the [N, E, D] block older
        # snapshots hold). The comm slots are never written and stay zero.
        self._obs_rows = np.zeros((E, N, D), np.float32)
        self._final_rows = np.zeros((E, N, D), np.float32)
        self._setup(E, max_steps, max_cycles,
                    obs_buffers=block_views(self._obs_rows, self.agents),
                    final_buffers=block_views(self._final_rows, self.agents))

        self.bodies = Particles(E, [AGENT_SIZE] * N, collide=True)
        self.landmarks = np.zeros((N, DIM_P, E))
        self._collide_dist = 2 * AGENT_SIZE
        # others[i] = the agents other than i, in order.
        self._others = np.array([[j for j in range(N) if j != i] for i in range(N)],
                                np.int64).reshape(N, N - 1)
        self._force = np.empty((N, DIM_P, E))
        if self.continuous_actions:
            self._actions = np.empty((N, E, MOVE_ACTIONS), np.float32)
        else:
            self._actions = np.empty((N, E), np.int64)
        self._rel_lm = np.empty((N, N, DIM_P, E))  # landmark l - agent i at [i, l]
        self._rel_ag = np.empty((N, N - 1, DIM_P, E))  # k-th other agent - agent i at [i, k]
        self._dist_lm = np.empty((N, N, E))
        self._dist_ag = np.empty((N, N - 1, E))
        self._tmp_lm = np.empty((N, N, E))
        self._tmp_ag = np.empty((N, N - 1, E))
        self._nearest = np.empty((N, E))
        self._hits = np.empty((N, N - 1, E), bool)
        self._count = np.empty((N, E), np.int64)
        self._rel_fresh = False

    # -- dynamics -------------------------------------------------------------------------
    def _reset_rows(self, rows: np.ndarray | slice) -> None:
        # Agents first, then landmarks, as mpe2 draws them.
        self.bodies.reset_rows(rows, self._rng)
        self.landmarks[:, :, rows] = uniform_positions(self._rng, self.num_envs, rows, self.N)
        self._rel_fresh = False

    def _advance(self, actions: dict[str, np.ndarray]) -> None:
        act = self._actions
        np.stack([actions[a] for a in self.agents], axis=0, out=act)
        if self.continuous_actions:
            np.clip(act, 0.0, 1.0, out=act)
            continuous_move_force(act, self._force)
        else:
            self._check_discrete(act, self.agents)
            discrete_move_force(act, self._force)
        self.bodies.step(self._force)
        self._relate()
        # Rewards of the new state: global = -(sum over landmarks of the nearest agent's
        # distance), local = -(number of other agents overlapping this one).
        lengths(self._rel_lm, self._dist_lm, self._tmp_lm)
        np.min(self._dist_lm, axis=0, out=self._nearest)
        near = self._nearest.sum(axis=0)  # [E]
        lengths(self._rel_ag, self._dist_ag, self._tmp_ag)
        np.less(self._dist_ag, self._collide_dist, out=self._hits)
        np.sum(self._hits, axis=1, out=self._count)
        reward = self._reward.T  # [N, E]
        lr = self.local_ratio
        np.multiply(self._count, -lr, out=reward)
        near *= -(1.0 - lr)
        reward += near

    def _relate(self) -> None:
        """Landmarks and other agents relative to each agent, for observations and rewards."""
        pos = self.bodies.pos
        np.subtract(self.landmarks[None], pos[:, None], out=self._rel_lm)
        np.take(pos, self._others, axis=0, out=self._rel_ag)
        self._rel_ag -= pos[:, None]
        self._rel_fresh = True

    # -- observations ---------------------------------------------------------------------
    def _obs_into(self, block: np.ndarray) -> None:
        """Write every agent's observation into ``block[E, N, D]`` (comm slots untouched)."""
        if not self._rel_fresh:
            self._relate()
        N, E = self.N, self.num_envs
        out = block.transpose(1, 2, 0)  # [N, D, E]
        out[:, 0:2] = self.bodies.vel
        out[:, 2:4] = self.bodies.pos
        out[:, 4:4 + 2 * N] = self._rel_lm.reshape(N, 2 * N, E)
        out[:, 4 + 2 * N:4 + 4 * N - 2] = self._rel_ag.reshape(N, 2 * (N - 1), E)

    def _write_obs(self) -> None:
        self._obs_into(self._obs_rows)

    def _save_final(self, rows: np.ndarray | slice) -> None:
        self._final_rows[rows] = self._obs_rows[rows]

    def state(self) -> np.ndarray:
        block = np.zeros_like(self._obs_rows)
        self._obs_into(block)
        return block.reshape(self.num_envs, self.N * self.obs_dim)

    def _bodies(self, e: int) -> list[tuple[float, float, float, tuple[float, float, float]]]:
        landmarks = [(*self.landmarks[i, :, e].tolist(), LANDMARK_SIZE, LANDMARK_COLOR)
                     for i in range(self.N)]
        agents = [(*self.bodies.pos[i, :, e].tolist(), AGENT_SIZE, AGENT_COLOR)
                  for i in range(self.N)]
        return landmarks + agents

    # -- tests and tools ------------------------------------------------------------------
    def set_state_from_mpe(self, e: int, world: Any, steps: int = 0) -> None:
        """Make copy ``e`` hold the state of an mpe2 simple_spread ``world``.

        ``steps`` is how many steps that episode has already run.
        """
        if len(world.agents) != self.N or len(world.landmarks) != self.N:
            raise ValueError(f"the world has {len(world.agents)} agents, this env N={self.N}")
        for i, agent in enumerate(world.agents):
            self.bodies.pos[i, :, e] = agent.state.p_pos
            self.bodies.vel[i, :, e] = agent.state.p_vel
        for i, landmark in enumerate(world.landmarks):
            self.landmarks[i, :, e] = landmark.state.p_pos
        self._t[e] = steps
        self._started = True
        self._rel_fresh = False
        self._write_obs()

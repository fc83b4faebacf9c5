"""``Swarm``: a cheap Parallel env with any number of agents, for scaling tests and benchmarks.

Each agent is a point in the plane that moves one of five ways (stay, left, right, down, up)
and is paid minus its distance to the swarm's centre. It sees its own position and the offset
to the centre. The env's own work is a few array operations per step, so whatever a loop
around it adds per agent shows up plainly. Episodes are truncated after ``max_cycles`` steps.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from interplay.envs.toy.games import SharedSpaces, cut_at_max_cycles

_MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], np.float32) * 0.05


class Swarm(SharedSpaces):
    metadata = {"name": "swarm_v0", "render_modes": []}

    def __init__(self, n_agents: int = 100, max_cycles: int = 50):
        if n_agents < 1:
            raise ValueError(f"n_agents must be at least 1, got {n_agents}")
        super().__init__([f"bee_{i}" for i in range(n_agents)],
                         spaces.Box(-4.0, 4.0, (4,), np.float32), spaces.Discrete(5))
        self.max_cycles = max_cycles

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        self.pos = self._rng.uniform(-1, 1, (len(self.agents), 2)).astype(np.float32)
        obs, _ = self._observe()
        return obs, {a: {} for a in self.agents}

    def _observe(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        centre = self.pos.mean(axis=0)
        offset = centre - self.pos
        rows = np.concatenate([self.pos, offset], axis=1)
        # One array per agent, as most envs hand them out (not views into one buffer).
        per_agent = [np.array(r) for r in rows.tolist()] if len(rows) else []
        return dict(zip(self.agents, per_agent, strict=True)), np.sqrt((offset ** 2).sum(axis=1))

    def step(self, actions: dict):
        moves = np.fromiter((actions[a] for a in self.agents), np.int64, len(self.agents))
        self.pos = np.clip(self.pos + _MOVES[moves], -2.0, 2.0)
        self.t += 1
        obs, dist = self._observe()
        rewards = dict(zip(self.agents, (-dist).tolist(), strict=True))
        return cut_at_max_cycles(self, obs, rewards, self.max_cycles)


def parallel_env(**kwargs) -> Swarm:
    return Swarm(**kwargs)

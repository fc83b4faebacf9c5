"""``ColorMatch``: a small Parallel env with RGB image observations, for image tests and benchmarks.

Each agent sees a ``size``×``size`` RGB frame (uint8) filled with one of ``n_colors`` colours
plus noise, and is paid 1 for naming the colour (its action), 0 otherwise. A new colour is
drawn for every agent at every step; episodes are truncated after ``max_cycles`` steps.
Random play earns ``1 / n_colors`` per step; reading the frame earns 1.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from interplay.envs.toy.games import SharedSpaces, cut_at_max_cycles

PALETTE = np.array([[220, 40, 40], [40, 200, 40], [40, 60, 220], [230, 200, 40],
                     [200, 40, 200], [40, 200, 200], [240, 240, 240], [90, 90, 90]], np.int16)


class ColorMatch(SharedSpaces):
    metadata = {"name": "color_match_v0", "render_modes": []}

    def __init__(self, n_agents: int = 2, size: int = 42, n_colors: int = 3,
                 max_cycles: int = 25):
        if not 2 <= n_colors <= len(PALETTE):
            raise ValueError(f"n_colors must be between 2 and {len(PALETTE)}, got {n_colors}")
        super().__init__([f"eye_{i}" for i in range(n_agents)],
                         self._observation_space(size, n_colors), spaces.Discrete(n_colors))
        self.size, self.n_colors, self.max_cycles = size, n_colors, max_cycles

    @staticmethod
    def _observation_space(size: int, n_colors: int) -> spaces.Space:
        return spaces.Box(0, 255, (size, size, 3), np.uint8)

    def _draw(self) -> dict[str, np.ndarray]:
        self.colors = self._rng.integers(self.n_colors, size=len(self.agents))
        noise = self._rng.integers(-30, 31, (len(self.agents), self.size, self.size, 3))
        frames = np.clip(PALETTE[self.colors][:, None, None, :] + noise, 0, 255).astype(np.uint8)
        return {a: frames[i] for i, a in enumerate(self.agents)}

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._draw(), {a: {} for a in self.agents}

    def _targets(self) -> np.ndarray:
        """Each agent's paid action this step."""
        return self.colors

    def step(self, actions: dict):
        rewards = {a: float(int(actions[a]) == c)
                   for a, c in zip(self.agents, self._targets(), strict=True)}
        self.t += 1
        return cut_at_max_cycles(self, self._draw(), rewards, self.max_cycles)


def parallel_env(**kwargs) -> ColorMatch:
    return ColorMatch(**kwargs)

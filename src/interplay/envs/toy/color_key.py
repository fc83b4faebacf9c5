"""``ColorKey``: a Parallel env with Dict observations, an RGB image beside a float vector, whose
task needs both.

Each agent sees ``{"camera": frame, "key": one_hot}``: a ``size``×``size`` RGB frame (uint8)
filled with one of ``n_colors`` colours plus noise, and a one-hot float vector naming a shift
``k``. It is paid 1 for the action ``(colour + k) % n_colors``, 0 otherwise. Colour and shift
are drawn anew for every agent at every step; episodes are truncated after ``max_cycles``
steps. Random play earns ``1 / n_colors`` per step, and so does reading only the frame or only
the key; reading both earns 1.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from interplay.envs.toy.games import SharedSpaces, cut_at_max_cycles
from interplay.envs.toy.pixels import PALETTE


class ColorKey(SharedSpaces):
    metadata = {"name": "color_key_v0", "render_modes": []}

    def __init__(self, n_agents: int = 2, size: int = 42, n_colors: int = 3,
                 max_cycles: int = 25):
        if not 2 <= n_colors <= len(PALETTE):
            raise ValueError(f"n_colors must be between 2 and {len(PALETTE)}, got {n_colors}")
        obs = spaces.Dict({"camera": spaces.Box(0, 255, (size, size, 3), np.uint8),
                           "key": spaces.Box(0.0, 1.0, (n_colors,), np.float32)})
        super().__init__([f"eye_{i}" for i in range(n_agents)], obs, spaces.Discrete(n_colors))
        self.size, self.n_colors, self.max_cycles = size, n_colors, max_cycles

    def _draw(self) -> dict[str, dict[str, np.ndarray]]:
        n = len(self.agents)
        self.colors = self._rng.integers(self.n_colors, size=n)
        self.shifts = self._rng.integers(self.n_colors, size=n)
        noise = self._rng.integers(-30, 31, (n, self.size, self.size, 3))
        frames = np.clip(PALETTE[self.colors][:, None, None, :] + noise, 0, 255).astype(np.uint8)
        keys = np.eye(self.n_colors, dtype=np.float32)[self.shifts]
        return {a: {"camera": frames[i], "key": keys[i]} for i, a in enumerate(self.agents)}

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._draw(), {a: {} for a in self.agents}

    def step(self, actions: dict):
        targets = (self.colors + self.shifts) % self.n_colors
        rewards = {a: float(int(actions[a]) == c)
                   for a, c in zip(self.agents, targets, strict=True)}
        self.t += 1
        return cut_at_max_cycles(self, self._draw(), rewards, self.max_cycles)


def parallel_env(**kwargs) -> ColorKey:
    return ColorKey(**kwargs)

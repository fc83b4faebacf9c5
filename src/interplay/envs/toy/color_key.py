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

from interplay.envs.toy.pixels import PALETTE, ColorMatch


class ColorKey(ColorMatch):
    """``ColorMatch`` with a key beside the frame: reset and step are its, the draw and the
    paid action are this env's."""

    metadata = {"name": "color_key_v0", "render_modes": []}

    @staticmethod
    def _observation_space(size: int, n_colors: int) -> spaces.Space:
        return spaces.Dict({"camera": spaces.Box(0, 255, (size, size, 3), np.uint8),
                            "key": spaces.Box(0.0, 1.0, (n_colors,), np.float32)})

    def _draw(self) -> dict[str, dict[str, np.ndarray]]:
        n = len(self.agents)
        self.colors = self._rng.integers(self.n_colors, size=n)
        self.shifts = self._rng.integers(self.n_colors, size=n)
        noise = self._rng.integers(-30, 31, (n, self.size, self.size, 3))
        frames = np.clip(PALETTE[self.colors][:, None, None, :] + noise, 0, 255).astype(np.uint8)
        keys = np.eye(self.n_colors, dtype=np.float32)[self.shifts]
        return {a: {"camera": frames[i], "key": keys[i]} for i, a in enumerate(self.agents)}

    def _targets(self) -> np.ndarray:
        return (self.colors + self.shifts) % self.n_colors


def parallel_env(**kwargs) -> ColorKey:
    return ColorKey(**kwargs)

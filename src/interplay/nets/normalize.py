"""Running mean and variance, merged batch by batch; for observations and returns."""

from __future__ import annotations

from typing import Any

import numpy as np

from interplay.envs.leaves import FLOAT_BYTES, Leaves


class RunningMeanStd:
    """Mean and variance of every row seen so far (Chan et al.'s parallel merge)."""

    def __init__(self, shape: tuple[int, ...] = (), eps: float = 1e-4):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = eps
        # the float32 mean and std, with the arrays they were cast from (see _float32)
        self._held: tuple[np.ndarray, ...] | None = None

    def update(self, x: np.ndarray) -> None:
        if x.shape[0] == 0:
            return
        mean, var, n = x.mean(axis=0), x.var(axis=0), x.shape[0]
        total = self.count + n
        delta = mean - self.mean
        self.mean = self.mean + delta * n / total
        self.var = (self.var * self.count + var * n + delta**2 * self.count * n / total) / total
        self.count = total

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(self.var + 1e-8)

    def normalize(self, x: np.ndarray, clip: float | None = None) -> np.ndarray:
        """``x`` standardised, in float32 (computed in it too: it is what networks take)."""
        mean, std = self._float32()
        out = np.subtract(x, mean, dtype=np.float32)
        out /= std
        if clip is not None:
            np.clip(out, -clip, clip, out=out)
        return out

    def _float32(self) -> tuple[np.ndarray, np.ndarray]:
        """The mean and std in float32, worked out once per update (which replaces the
        arrays; nothing changes them in place)."""
        held = self._held
        if held is None or held[0] is not self.mean or held[1] is not self.var:
            held = self._held = (self.mean, self.var, self.mean.astype(np.float32),
                                 self.std.astype(np.float32))
        return held[2], held[3]

    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": float(self.count)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mean = np.array(state["mean"], np.float64)
        self.var = np.array(state["var"], np.float64)
        self.count = float(state["count"])


class LeafNorm(RunningMeanStd):
    """Running statistics of the float entries of rows kept entry by entry
    (:mod:`interplay.envs.leaves`); image entries are left as they are (a network scales
    image bytes itself), and rows keep their dtype (bytes stay bytes)."""

    def __init__(self, leaves: Leaves, stack: int):
        self.leaves = leaves
        self.cols = leaves.float_columns(stack)
        self.width = self.cols.size // (FLOAT_BYTES if leaves.bytes else 1)
        super().__init__((self.width,))

    def update(self, x: np.ndarray) -> None:
        super().update(self.leaves.read_floats(x, self.cols).reshape(-1, self.width))

    def normalize(self, x: np.ndarray, clip: float | None = None) -> np.ndarray:
        out = np.array(x, copy=True)
        self.leaves.write_floats(out, self.cols,
                                 super().normalize(self.leaves.read_floats(x, self.cols), clip))
        return out

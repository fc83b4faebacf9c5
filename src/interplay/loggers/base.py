"""What a logger is: it is handed every report row (train and test phases) and, where it can
show them, the videos of test episodes (``log.loggers`` lists them)."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Logger(Protocol):
    """Takes the report rows a run writes to ``metrics.jsonl``, in order, then is closed."""

    def write(self, row: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class VideoLogger(Logger, Protocol):
    """A logger that shows test episodes' videos too (``train.render_every``)."""

    def video(self, tag: str, frames: np.ndarray, durations: Sequence[float], step: int,
              path: Path | None = None) -> None: ...


BUILT_IN = ("console", "jsonl", "tensorboard", "wandb")
"""The loggers ``log.loggers`` may name without a module; ``console`` and ``jsonl``
(``metrics.jsonl``) are always there, ``tensorboard`` and ``wandb`` as their switches say."""


def scalars(row: dict[str, Any]) -> tuple[str, int, dict[str, float]]:
    """Split a report row into its phase, its env step and its numeric fields by name.

    Names are ``<phase>/<field>``; ``None``, booleans and text are left out.
    """
    try:
        phase, step = str(row["phase"]), int(row["env_steps"])
    except KeyError as err:
        raise ValueError(f"metrics row has no {err.args[0]!r}: {row!r}") from None
    values = {
        f"{phase}/{key}": float(value) for key, value in row.items()
        if key not in ("phase", "env_steps")
        and isinstance(value, numbers.Real) and not isinstance(value, bool)
    }
    return phase, step, values

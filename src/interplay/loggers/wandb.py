"""Weights & Biases: the rows that go to ``metrics.jsonl``, with ``env_steps`` as the x axis."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from interplay.loggers.base import scalars


class WandbLogger:
    """The same rows sent to Weights & Biases, with ``env_steps`` as the x axis."""

    def __init__(self, run_dir: Path, project: str, config: dict[str, Any], mode: str = "offline"):
        try:
            import wandb
        except ImportError as err:
            raise ImportError(
                "W&B logging needs the wandb package: pip install 'interplay[wandb]'") from err
        self._run = wandb.init(project=project, config=config, dir=str(run_dir),
                               name=Path(run_dir).name, mode=mode)
        # Train and test rows share env steps, so W&B's own step counter cannot be the x axis.
        self._run.define_metric("env_steps")
        self._run.define_metric("*", step_metric="env_steps")

    def write(self, row: dict[str, Any]) -> None:
        _, step, values = scalars(row)
        self._run.log({"env_steps": step, **values})

    def video(self, tag: str, frames: np.ndarray, durations: Sequence[float], step: int,
              path: Path | None = None) -> None:
        import wandb

        fps = int(round(1000.0 / max(float(np.mean(durations)), 1.0)))
        # W&B takes frames as [T, C, H, W]
        media = (wandb.Video(str(path)) if path is not None
                 else wandb.Video(frames.transpose(0, 3, 1, 2), fps=fps, format="gif"))
        self._run.log({"env_steps": step, tag: media})

    def close(self) -> None:
        self._run.finish()

"""TensorBoard and Weights & Biases loggers for the rows that go to ``metrics.jsonl``."""

from __future__ import annotations

import numbers
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.tensorboard import SummaryWriter

from interplay.errors import WriteError


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


class TensorBoardLogger:
    """Each numeric field of a row as a scalar ``<phase>/<field>`` at step ``env_steps``.

    A resumed run passes ``purge_step``: TensorBoard then hides every event an earlier run
    logged at that step or later, which the resumed run logs again.
    """

    def __init__(self, log_dir: Path, purge_step: int | None = None):
        self._log_dir = log_dir
        try:
            self._writer = _writer_read_last(Path(log_dir), purge_step)
        except OSError as err:
            raise WriteError.of(log_dir, err) from err

    def write(self, row: dict[str, Any]) -> None:
        _, step, values = scalars(row)
        try:
            for tag, value in values.items():
                self._writer.add_scalar(tag, value, global_step=step)
            # Reports are rare next to env steps; flushing each keeps a crashed run's curves.
            self._writer.flush()
        except OSError as err:
            raise WriteError.of(self._log_dir, err) from err

    def video(self, tag: str, frames: np.ndarray, durations: Sequence[float], step: int,
              path: Path | None = None) -> None:
        """``frames`` ``[T, H, W, 3]`` as an animated image (TensorBoard's Images tab plays it)."""
        from tensorboard.compat.proto.summary_pb2 import Summary

        from interplay.loggers.video import gif_bytes

        _, height, width, channels = frames.shape
        image = Summary.Image(height=height, width=width, colorspace=channels,
                              encoded_image_string=gif_bytes(frames, durations))
        try:
            self._writer._get_file_writer().add_summary(
                Summary(value=[Summary.Value(tag=tag, image=image)]), step)
            self._writer.flush()
        except OSError as err:
            raise WriteError.of(self._log_dir, err) from err

    def close(self) -> None:
        try:
            self._writer.close()
        except OSError as err:
            raise WriteError.of(self._log_dir, err) from err


def _writer_read_last(log_dir: Path, purge_step: int | None) -> SummaryWriter:
    """A writer whose event file TensorBoard reads after the folder's others.

    It reads them in name order, which is the order they were made in only across seconds
    (``events.out.tfevents.<second>.<host>.<pid>.<n>``); a purge read too early purges nothing.
    """
    before = set()
    if purge_step is not None:
        before = {p.name for p in log_dir.glob("events.out.tfevents.*")}
    for attempt in range(2):
        writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step)
        writer.flush()
        mine = [p for p in log_dir.glob("events.out.tfevents.*") if p.name not in before]
        if not before or attempt or all(p.name > max(before) for p in mine):
            break
        writer.close()
        for p in mine:
            p.unlink()
        time.sleep(1.0 - time.time() % 1.0)  # the next second's name sorts after
    return writer


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

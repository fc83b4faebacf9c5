"""TensorBoard: the rows that go to ``metrics.jsonl`` as scalars, test episodes as videos."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.tensorboard import SummaryWriter

from interplay.errors import WriteError
from interplay.loggers.base import scalars


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

"""Videos of greedy episodes: GIF (or MP4 where ``imageio-ffmpeg`` is installed) files, and
animated images in TensorBoard (its image plugin plays a GIF as it is)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def video_suffix() -> str:
    """``.mp4`` where imageio can write one (``imageio-ffmpeg``), else ``.gif``."""
    return ".mp4" if importlib.util.find_spec("imageio_ffmpeg") is not None else ".gif"


def gif_bytes(frames: np.ndarray, durations: Sequence[float]) -> bytes:
    """``frames`` ``[T, H, W, 3]`` as an endless GIF, each shown ``durations[t]`` milliseconds."""
    import imageio.v3 as imageio

    return bytes(imageio.imwrite("<bytes>", frames, extension=".gif", duration=list(durations),
                                 loop=0))


def write_video(frames: np.ndarray, durations: Sequence[float], dest: Path) -> Path:
    """Write ``frames`` to ``dest``: a GIF with ``durations`` (ms), or an MP4 at the mean rate."""
    import imageio.v3 as imageio

    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.suffix == ".mp4":
        fps = 1000.0 / max(float(np.mean(durations)), 1.0)
        imageio.imwrite(dest, frames, fps=fps, macro_block_size=1)
    else:
        dest.write_bytes(gif_bytes(frames, durations))
    return dest

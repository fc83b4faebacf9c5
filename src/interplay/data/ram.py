"""How much RAM storage will take, checked against what the machine has before allocating.

NumPy hands out zeroed arrays lazily, so an impossible buffer is not refused when it is made:
it fills up until the machine swaps or the process is killed, hours into a run. Storage says
what it will need from its shape alone, and :func:`check_fits` refuses it up front, naming
the setting that sized it.
"""

from __future__ import annotations

import os

import numpy as np

from interplay.errors import UserError


class StorageSizeError(UserError, MemoryError):
    """Storage that cannot fit in this machine's memory, named by the setting that sized it."""


def row_bytes(*columns: tuple[tuple[int, ...], object]) -> int:
    """Bytes one row takes, given each column's per-row shape and dtype."""
    return sum(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
               for shape, dtype in columns)


def available_bytes() -> int | None:
    """Memory this process could still take without swapping, or None where it cannot be told."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def check_fits(needed: int, key: str, what: str, fix: str | None = None) -> None:
    """Refuse ``needed`` bytes of storage when the machine does not have them free; ``fix``
    says what to change (by default: lower ``key``)."""
    free = available_bytes()
    if free is not None and needed > free:
        raise StorageSizeError(
            f"{key}: {what} needs {human(needed)} ({needed:,} bytes) but only {human(free)} "
            f"({free:,} bytes) of memory is available; {fix or f'lower {key}'}")

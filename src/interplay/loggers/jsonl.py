"""``metrics.jsonl``: one JSON object per report, the run's own record."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from interplay.errors import WriteError


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class JsonlLogger:
    """One JSON object per report, appended and flushed at once.

    Every row in the file is whole: a row is one line written as one piece, and a write that
    fails (a full disk, say) is cut back off before the error, which names the file.
    """

    def __init__(self, path: Path):
        self.path = path
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0)
        self._fd = os.open(path, flags, 0o666)
        self._end = os.lseek(self._fd, 0, os.SEEK_END)

    def write(self, row: dict[str, Any]) -> None:
        line = (json.dumps({k: _jsonable(v) for k, v in row.items()}) + "\n").encode()
        try:
            done = 0
            while done < len(line):  # a write may take only part of it
                done += os.write(self._fd, line[done:])
        except OSError as err:
            raise WriteError.of(self.path, err, self._cut_back()) from err
        self._end += len(line)

    def _cut_back(self) -> str:
        try:
            os.ftruncate(self._fd, self._end)
        except OSError as err:
            return f"its last row is incomplete and could not be removed ({err})"
        return "every row in it is whole"

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

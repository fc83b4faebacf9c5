"""Loggers of a user's own, for tests/test_loggers.py (``log.loggers: [own_loggers:Rows]``)."""

from __future__ import annotations

BUILT: list[tuple[object, dict]] = []
ROWS: list[dict] = []
CLOSED: list[bool] = []


class Rows:
    def __init__(self, run_dir, config):
        BUILT.append((run_dir, config))

    def write(self, row):
        ROWS.append(dict(row))

    def close(self):
        CLOSED.append(True)


class Breaks(Rows):
    def write(self, row):
        raise RuntimeError("the dashboard is down")


class NoWrite:
    def __init__(self, run_dir, config):
        pass

    def close(self):
        pass


class FailsToStart:
    def __init__(self, run_dir, config):
        raise ValueError("no token")

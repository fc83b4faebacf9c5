"""The local backend: everything in this process, in order."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def map_members(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``fn(item)`` for each item, one after the other."""
    return [fn(item) for item in items]

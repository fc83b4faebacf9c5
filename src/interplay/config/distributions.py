"""Distributions a config value may hold (``env.reset_options``, ``env.kwargs``): a mapping
with one key, ``{uniform: [lo, hi]}``, ``{int_range: [lo, hi]}`` or ``{choice: [a, ...]}``;
how they are checked, and drawn (see :mod:`interplay.envs.variation`)."""

from __future__ import annotations

from typing import Any

import numpy as np

DISTRIBUTIONS = ("uniform", "int_range", "choice")


def is_distribution(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in DISTRIBUTIONS


def check_distribution(value: Any) -> None:
    """Raise ValueError saying what is wrong with a distribution."""
    kind, args = next(iter(value.items()))
    if not isinstance(args, list) or not args:
        raise ValueError(f"{{{kind}: ...}} takes a list, got {args!r}")
    if kind == "choice":
        return
    if len(args) != 2 or not all(isinstance(a, (int, float)) and not isinstance(a, bool)
                                 for a in args):
        raise ValueError(f"{{{kind}: [lo, hi]}} takes two numbers, got {args!r}")
    if args[0] > args[1]:
        raise ValueError(f"{{{kind}: [lo, hi]}}: lo {args[0]} is above hi {args[1]}")
    if kind == "int_range" and not all(float(a).is_integer() for a in args):
        raise ValueError(f"{{int_range: [lo, hi]}} takes whole numbers, got {args!r}")


def check_values(values: dict[str, Any]) -> None:
    """Raise ValueError naming the first malformed distribution among ``values``."""
    for key, value in values.items():
        if is_distribution(value):
            try:
                check_distribution(value)
            except ValueError as err:
                raise ValueError(f"{key}: {err}") from None


def draw(value: Any, rng: np.random.Generator) -> Any:
    kind, args = next(iter(value.items()))
    if kind == "uniform":
        return float(rng.uniform(args[0], args[1]))
    if kind == "int_range":
        return int(rng.integers(int(args[0]), int(args[1]) + 1))
    return args[int(rng.integers(len(args)))]


def first(value: Any) -> Any:
    """What a distribution gives before any draw (the env built to read its spaces)."""
    kind, args = next(iter(value.items()))
    return args[0] if kind == "choice" else (int(args[0]) if kind == "int_range" else float(args[0]))


def varied(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if is_distribution(v)}

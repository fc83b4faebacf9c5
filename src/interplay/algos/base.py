"""What an algorithm supplies to the training loop, and the registry of algorithms.

The trainer owns the loop (collect → store → update → log → test → checkpoint). An
algorithm builds one actor per policy it trains, takes the transitions the runner closes,
and says when it wants to learn. It never touches envs, loggers or files.
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from interplay.config.schema import ConfigError
from interplay.run.actors import Actor
from interplay.run.mapping import PolicySpec
from interplay.run.transitions import Transitions


class AlgoSettings(BaseModel):
    """Settings shared by every algorithm; subclasses add their own fields."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    name: str


class Algorithm:
    name: ClassVar[str]
    Settings: ClassVar[type[AlgoSettings]] = AlgoSettings
    action_kinds: ClassVar[frozenset[str]] = frozenset({"discrete", "multi_discrete", "box"})
    turn_based: ClassVar[bool] = True  # can learn from AEC (one mover per step) envs
    # Metrics of update() that give the algorithm's state (a buffer's size, a schedule's value)
    # rather than one update's outcome: a report shows their value at its last update, not a
    # mean over its updates. A name matches by itself or by its part before "/".
    gauges: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, settings: AlgoSettings, specs: dict[str, PolicySpec], device: str,
                 seed: int):
        self.settings = settings
        self.specs = specs
        self.device = device
        self.seed = seed

    def actor(self, pid: str) -> Actor:
        """The actor for trainable policy ``pid``."""
        raise NotImplementedError

    def collect(self, pid: str, batch: Transitions) -> None:
        """Take the transitions the runner closed for ``pid`` in one step."""

    def ready(self) -> bool:
        """Whether to call :meth:`update` now."""
        return False

    def update(self) -> dict[str, float]:
        """Learn from what was collected; returns learner metrics by name."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


REGISTRY: dict[str, type[Algorithm]] = {}


def register(cls: type[Algorithm]) -> type[Algorithm]:
    REGISTRY[cls.name] = cls
    return cls


def algorithm_class(name: str) -> type[Algorithm]:
    if name not in REGISTRY:
        import difflib

        near = difflib.get_close_matches(name, list(REGISTRY), n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise ConfigError(f"algo.name: unknown algorithm {name!r}{hint} (known: {', '.join(sorted(REGISTRY))})")
    return REGISTRY[name]


def rng_for(seed: int, *names: str) -> np.random.Generator:
    """A generator derived from the run's seed and a name, so each consumer has its own stream."""
    words = [int.from_bytes(hashlib.sha256(n.encode()).digest()[:8], "little") for n in names]
    return np.random.default_rng(np.random.SeedSequence([seed, *words]))

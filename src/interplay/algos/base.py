"""What an algorithm supplies to the training loop, and the registry of algorithms.

The trainer owns the loop (collect → store → update → log → test → checkpoint). An
algorithm builds one actor per policy it trains, takes the transitions the runner closes,
and says when it wants to learn. It never touches envs, loggers or files.
"""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

import numpy as np

from interplay.config.algo import AlgoSettings, register_settings, settings_class
from interplay.config.code import load_callable
from interplay.errors import ConfigError
from interplay.run.actors import Actor
from interplay.run.mapping import PolicySpec
from interplay.run.transitions import Transitions


class Algorithm:
    name: ClassVar[str]
    Settings: ClassVar[type[AlgoSettings]] = AlgoSettings
    action_kinds: ClassVar[frozenset[str]] = frozenset({"discrete", "multi_discrete", "box"})
    turn_based: ClassVar[bool] = True  # can learn from AEC (one mover per step) envs

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
    """Make ``cls`` known by its ``name`` to configs (``algo.name``) and to the CLI."""
    REGISTRY[cls.name] = cls
    register_settings(cls.name, cls.Settings)
    return cls


def algorithm_class(name: str) -> type[Algorithm]:
    """The algorithm ``algo.name`` names: a registered one, or ``module:Class``."""
    if name in REGISTRY:
        return REGISTRY[name]
    settings_class(name)  # names what is wrong with an unknown or malformed name
    cls = load_callable(name, "algo.name")
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise ConfigError(f"algo.name: {name!r} is not a subclass of interplay.Algorithm")
    return cls


def rng_for(seed: int, *names: str) -> np.random.Generator:
    """A generator derived from the run's seed and a name, so each consumer has its own stream."""
    words = [int.from_bytes(hashlib.sha256(n.encode()).digest()[:8], "little") for n in names]
    return np.random.default_rng(np.random.SeedSequence([seed, *words]))

"""Envs varied per episode: reset options and constructor kwargs drawn from distributions.

A value of ``env.reset_options`` or ``env.kwargs`` may be a distribution, a mapping with one
key: ``{uniform: [lo, hi]}`` (a float), ``{int_range: [lo, hi]}`` (an int, both ends
included) or ``{choice: [a, b, ...]}`` (one of them). :class:`VariedEnv` wraps each copy's
PettingZoo env (AEC or Parallel): at every reset it draws each distribution from its own
generator, seeded by the copy's seeded reset (so a seeded run draws the same values, and a
resumed one goes on drawing them: the generator is part of the env copy's snapshot), passes
the reset options to ``reset(options=...)``, and rebuilds the env when drawn constructor
kwargs differ from those it was built with (a rebuild costs what building the env costs, at
each episode boundary where a value changes). ``drawn`` holds the episode's values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from interplay.config.distributions import draw, first, is_distribution, varied

HISTORY = 1000  # finished episodes a copy keeps for its curriculum
_SALT = 0x0E1A  # the draws' stream, apart from any stream the env seeds from the same seed


class VariedEnv:
    """A PettingZoo env whose reset options and constructor kwargs are drawn per episode."""

    def __init__(self, build: Callable[[dict[str, Any]], Any], options: dict[str, Any],
                 kwargs: dict[str, Any]):
        self._build = build
        self._options = options  # fixed values and distributions
        self._kwargs = varied(kwargs)  # distributions only; fixed kwargs are in build
        self.built_with = {k: first(v) for k, v in sorted(self._kwargs.items())}
        self.env = build(self.built_with)
        self.rng = np.random.default_rng(_SALT)  # replaced at the first seeded reset
        self.drawn: dict[str, Any] = {}
        self.rebuilds = 0
        # A curriculum: called at each reset with this copy's finished episodes (``options``
        # and ``return`` each, the newest last), it may override the next episode's values.
        self.chooser: Callable[[list[dict[str, Any]]], dict[str, Any] | None] | None = None
        self.history: list[dict[str, Any]] = []
        self._return = 0.0
        self._steps = 0
        self._aec = hasattr(self.env, "agent_iter")

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet (a copy being unpickled): no recursion
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if seed is not None:
            self.rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_SALT,)))
        kwargs = {k: draw(v, self.rng) for k, v in sorted(self._kwargs.items())}
        chosen = {k: draw(v, self.rng) if is_distribution(v) else v
                  for k, v in sorted(self._options.items())}
        chosen.update(options or {})
        if self.chooser is not None:
            if self.drawn and self._steps:
                self.history = [*self.history[-HISTORY + 1:],
                                {"options": self.drawn, "return": self._return}]
            for key, value in (self.chooser(list(self.history)) or {}).items():
                (kwargs if key in self._kwargs else chosen)[key] = value
        self._return, self._steps = 0.0, 0
        if kwargs != self.built_with:
            self.env.close()
            self.env = self._build(kwargs)
            self.built_with = kwargs
            self.rebuilds += 1
            if seed is None:  # a fresh env left unseeded would draw from the OS's entropy
                seed = int(self.rng.integers(2**31 - 1))
        self.drawn = {**kwargs, **chosen}
        return self.env.reset(seed=seed, options=chosen or None)

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        if self.chooser is not None:  # the episode's return, for the curriculum
            rewards = self.env.rewards if self._aec else out[1]
            self._return += float(sum(rewards.values()))
            self._steps += 1
        return out


def varied_factory(make_with: Callable[[dict[str, Any]], Any], options: dict[str, Any],
                   kwargs: dict[str, Any]) -> Callable[[], VariedEnv]:
    """A zero-argument factory of :class:`VariedEnv` copies; ``make_with(drawn kwargs)``
    builds the env with the fixed kwargs and those drawn."""

    def make() -> VariedEnv:
        return VariedEnv(make_with, options, kwargs)

    return make

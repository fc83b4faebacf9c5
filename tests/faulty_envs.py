"""Envs that fail on purpose (raise, hang), for the vector envs' fault tests.

They live in a module of their own so worker processes can import them by name.
"""

from __future__ import annotations

import os
import time

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class FlakyCounter(ParallelEnv):
    """Two agents; each step pays agent ``i`` ``(t + 1) * (i + 1) + action / 2``.

    Episodes are truncated after ``length`` steps. ``step`` raises with probability ``p`` and
    ``reset`` with probability ``reset_p``, drawn from a generator seeded at reset, so a run
    is reproducible from its seeds. Rewards depend only on the step and the actions: a plain
    loop with the same actions gives the same returns.
    """

    metadata = {"name": "flaky_counter", "render_modes": []}

    def __init__(self, p: float = 0.1, reset_p: float = 0.0, length: int = 6):
        self.possible_agents = ["a_0", "a_1"]
        self.p = p
        self.reset_p = reset_p
        self.length = length
        self.rng = np.random.default_rng()
        self._obs_space = spaces.Box(-1e6, 1e6, (2,), np.float32)
        self._act_space = spaces.Discrete(3)

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space

    def _obs(self) -> dict[str, np.ndarray]:
        return {a: np.array([self.t, i], np.float32) for i, a in enumerate(self.agents)}

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        if self.rng.random() < self.reset_p:
            raise RuntimeError("flaky reset")
        self.t = 0
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions: dict):
        if self.rng.random() < self.p:
            raise RuntimeError(f"flaky step at t={self.t}")
        rewards = {a: (self.t + 1) * (i + 1) + int(actions[a]) / 2
                   for i, a in enumerate(self.agents)}
        self.t += 1
        done = self.t >= self.length
        obs = self._obs()
        terms = dict.fromkeys(self.agents, False)
        truncs = dict.fromkeys(self.agents, done)
        infos = {a: {} for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos


class Hanging(FlakyCounter):
    """A :class:`FlakyCounter` that never fails by chance, but hangs in ``step`` once when the
    file ``trigger`` exists (it removes the file first, so its replacement carries on)."""

    def __init__(self, trigger: str, **kwargs):
        super().__init__(p=0.0, **kwargs)
        self.trigger = trigger

    def step(self, actions: dict):
        try:
            os.remove(self.trigger)
        except FileNotFoundError:
            return super().step(actions)
        time.sleep(600)
        raise AssertionError("unreachable")


class NanReward(FlakyCounter):
    """A :class:`FlakyCounter` that never raises, but pays ``a_1`` NaN once ``after`` steps
    have passed (counting over all episodes of this copy)."""

    def __init__(self, after: int = 50, **kwargs):
        super().__init__(p=0.0, **kwargs)
        self.after = after
        self.total = 0

    def step(self, actions: dict):
        obs, rewards, terms, truncs, infos = super().step(actions)
        self.total += 1
        if self.total > self.after:
            rewards["a_1"] = float("nan")
        return obs, rewards, terms, truncs, infos


class Vanishing(FlakyCounter):
    """A :class:`FlakyCounter` (never failing) whose agent a_1 leaves after step ``leave``
    without a flag and without an observation."""

    def __init__(self, leave: int = 2, **kwargs):
        super().__init__(p=0.0, **kwargs)
        self.leave = leave

    def step(self, actions: dict):
        obs, rewards, terms, truncs, infos = super().step(actions)
        if self.t == self.leave and "a_1" in self.agents:
            self.agents.remove("a_1")
            for d in (obs, terms, truncs, infos):
                d.pop("a_1")
        return obs, rewards, terms, truncs, infos


class Lingering(FlakyCounter):
    """A :class:`FlakyCounter` (never failing) whose agent a_1 is terminated at step ``leave``,
    while the observation and info dicts go on holding every possible agent, finished or not."""

    def __init__(self, leave: int = 1, **kwargs):
        super().__init__(p=0.0, **kwargs)
        self.leave = leave

    def _obs(self) -> dict[str, np.ndarray]:
        return {a: np.array([self.t, i], np.float32) for i, a in enumerate(self.possible_agents)}

    def reset(self, seed: int | None = None, options: dict | None = None):
        obs, _ = super().reset(seed, options)
        return obs, {a: {} for a in self.possible_agents}

    def step(self, actions: dict):
        obs, rewards, terms, truncs, _ = super().step(actions)
        if self.t == self.leave and "a_1" in self.agents:
            terms["a_1"] = True
            self.agents.remove("a_1")
        return obs, rewards, terms, truncs, {a: {} for a in self.possible_agents}


class SeedPicky(FlakyCounter):
    """A :class:`FlakyCounter` (never failing by chance) that, like Hanabi and OpenSpiel games,
    takes only seeds below 2**31."""

    metadata = {"name": "seed_picky", "render_modes": []}

    def __init__(self, **kwargs):
        super().__init__(p=0.0, **kwargs)

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None and not 0 <= seed < 2**31:
            raise ValueError(f"seed must be between 0 and 2**31 - 1, got {seed}")
        return super().reset(seed, options)


class FailsEveryEpisode(FlakyCounter):
    """A :class:`FlakyCounter` whose step ``fail_at`` of every episode raises."""

    metadata = {"name": "fails_every_episode", "render_modes": []}

    def __init__(self, fail_at: int = 3, **kwargs):
        super().__init__(p=0.0, **kwargs)
        self.fail_at = fail_at

    def step(self, actions: dict):
        if self.t == self.fail_at:
            raise RuntimeError(f"cannot step past t={self.t}")
        return super().step(actions)


def seed_picky(**kwargs) -> SeedPicky:
    return SeedPicky(**kwargs)


def fails_every_episode(**kwargs) -> FailsEveryEpisode:
    return FailsEveryEpisode(**kwargs)


def vanishing(**kwargs) -> Vanishing:
    return Vanishing(**kwargs)


def nan_reward(**kwargs) -> NanReward:
    return NanReward(**kwargs)


def flaky_counter(**kwargs) -> FlakyCounter:
    return FlakyCounter(**kwargs)


def hanging(**kwargs) -> Hanging:
    return Hanging(**kwargs)


def no_agents() -> FlakyCounter:
    """Breaks the PettingZoo contract: lists no possible agents."""
    env = FlakyCounter(p=0.0)
    env.possible_agents = []
    return env

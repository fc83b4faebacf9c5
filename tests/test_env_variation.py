"""Envs varied per episode: distributions in ``env.reset_options`` and ``env.kwargs``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import ParallelEnv

from interplay import Callbacks, register_env
from interplay.config.loading import load
from interplay.errors import ConfigError
from interplay.experiment.loop import resume, train

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


class OptionEcho(ParallelEnv):
    """Two agents; every step rewards each with the episode's ``goal`` reset option; an
    episode lasts ``length`` steps (a constructor kwarg)."""

    metadata = {"name": "option_echo"}

    def __init__(self, length: int = 3):
        self.length = length
        self.possible_agents = ["a_0", "a_1"]
        self.goal = 0.0
        self.t = 0

    def observation_space(self, agent):
        return spaces.Box(-10, 10, (2,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _obs(self):
        return {a: np.array([self.goal, self.t], np.float32) for a in self.agents}

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.goal = float((options or {}).get("goal", 0.0))
        self.t = 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        done = self.t >= self.length
        rewards = {a: self.goal for a in self.agents}
        obs = self._obs()
        flags = {a: done for a in self.agents}
        infos = {a: {} for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, flags, {a: False for a in flags}, infos


@pytest.fixture(autouse=True)
def _env():
    register_env("option_echo", OptionEcho)


def _lines(run):
    return [json.loads(line) for line in (run / "env_options.jsonl").read_text().splitlines()]


BASE = ["env.id=option_echo", "env.num_envs=2", "env.reset_options.goal={uniform: [1, 3]}",
        "log.every=60", *QUIET]


def test_reset_options_are_drawn_per_episode_spread_as_asked_and_recorded(tmp_path):
    run = tmp_path / "run"
    train(load([], [*BASE, "train.steps=600"]), run)
    lines = _lines(run)
    goals = np.array([line["options"]["goal"] for line in lines])
    assert len(lines) == 200  # 600 env steps (both copies) / 3 steps an episode
    assert goals.min() >= 1 and goals.max() <= 3
    assert abs(goals.mean() - 2) < 0.15 and goals.std() > 0.45  # uniform on [1, 3]: 0.577
    assert len(set(goals.tolist())) == len(goals)  # drawn afresh each episode
    for line in lines:  # the env saw what was recorded: 3 steps x 2 agents x goal
        assert line["return"] == pytest.approx(6 * line["options"]["goal"], rel=1e-5)
    assert {line["copy"] for line in lines} == {0, 1}


def test_a_seeded_run_draws_the_same_and_a_resumed_run_goes_on_exactly(tmp_path):
    train(load([], [*BASE, "train.steps=300", "checkpoint.every=150"]), tmp_path / "straight")
    train(load([], [*BASE, "train.steps=150"]), tmp_path / "split")
    resume(tmp_path / "split", ["train.steps=300"])
    assert _lines(tmp_path / "straight") == _lines(tmp_path / "split")
    other = tmp_path / "other_seed"
    train(load([], [*BASE, "train.steps=150", "train.seed=1"]), other)
    assert [x["options"] for x in _lines(other)] != [x["options"] for x in _lines(tmp_path / "split")][:len(_lines(other))]


def test_kwargs_drawn_per_episode_rebuild_the_copy_and_reports_split_by_them(tmp_path):
    run = tmp_path / "run"
    result = train(load([], ["env.id=option_echo", "env.kwargs.length={choice: [2, 5]}",
                             "env.reset_options.goal={int_range: [1, 2]}", "log.split_by=length",
                             "train.steps=400", "log.every=400", *QUIET]), run)
    lines = _lines(run)
    assert {line["options"]["length"] for line in lines} == {2, 5}
    assert {line["options"]["goal"] for line in lines} == {1, 2}
    for line in lines:  # the rebuilt copy ran the drawn length
        assert line["return"] == 2 * line["options"]["length"] * line["options"]["goal"]
    row = result.rows[0]
    for length in (2, 5):
        mine = [x["return"] for x in lines if x["options"]["length"] == length]
        assert row[f"split/length={length}/episode_return"] == pytest.approx(np.mean(mine))


@pytest.mark.parametrize(("override", "message"), [
    ("env.reset_options.goal={uniform: [3, 1]}", "lo 3 is above hi 1"),
    ("env.kwargs.length={int_range: [1.5, 3]}", "whole numbers"),
    ("env.reset_options.goal={choice: 3}", "takes a list"),
])
def test_a_malformed_distribution_is_named(override, message):
    with pytest.raises(ConfigError, match=message):
        load([], ["env.id=option_echo", override])


def test_the_built_in_batched_envs_refuse_options(tmp_path):
    with pytest.raises(ConfigError, match="built-in batched envs"):
        train(load([], ["env.id=spread", "env.reset_options.x={uniform: [0, 1]}",
                        "train.steps=10", *QUIET]), tmp_path / "run")


class Ladder(Callbacks):
    """A curriculum: each copy's next goal is one more than its last, and the returns it is
    handed are those of the episodes it chose."""

    seen: list[tuple[int, float, float]] = []

    def next_env_options(self, *, env_index, episodes, runner):
        if not episodes:
            return {"goal": 1}
        last = episodes[-1]
        Ladder.seen.append((env_index, last["options"]["goal"], last["return"]))
        return {"goal": last["options"]["goal"] + 1}


def test_a_callback_sets_each_copys_next_options_from_the_returns_it_reads(tmp_path):
    Ladder.seen = []
    run = tmp_path / "run"
    cfg = [*BASE, "train.steps=60", "train.test_frequency=30", "train.test_episodes=2"]
    train(load([], cfg), run, callbacks=[Ladder()])
    lines = _lines(run)
    for copy in (0, 1):
        goals = [x["options"]["goal"] for x in lines if x["copy"] == copy]
        assert goals == list(range(1, len(goals) + 1))
    assert Ladder.seen and all(ret == pytest.approx(6 * goal) for _, goal, ret in Ladder.seen)
    # resumed: the copies' histories come back, so the ladder goes on where it was
    train(load([], [*cfg, "train.steps=30"]), tmp_path / "split", callbacks=[Ladder()])
    resume(tmp_path / "split", ["train.steps=60"], callbacks=[Ladder()])
    assert _lines(tmp_path / "split") == lines

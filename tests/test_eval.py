"""``interplay eval``: scores, the --env check, and GIFs of built-in and PettingZoo envs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gymnasium import spaces

from interplay.config.schema import ConfigError, load
from interplay.envs.toy import ShiftingCrowd
from interplay.experiment.evaluate import evaluate
from interplay.experiment.loop import train

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


class WideCrowd(ShiftingCrowd):
    """ShiftingCrowd's agents with a wider observation space."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._obs_space = spaces.Box(-1e6, 1e6, (3,), np.float32)

    def _obs(self, agent):
        return np.zeros(3, np.float32)


def wide_crowd(**kwargs):
    return WideCrowd(**kwargs)


def other_crowd(**kwargs):
    return ShiftingCrowd(schedule={"b_0": (0, 100)}, **kwargs)


@pytest.fixture(scope="module")
def crowd_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("crowd")
    train(load([], ["env.id=interplay.envs.toy:shifting_crowd", "train.steps=40", *QUIET]), run)
    return run


@pytest.mark.parametrize(("env_id", "message"), [
    (f"{__name__}:other_crowd",
     r"env '[\w.]+:other_crowd' has agents \['b_0'\], but the policies were made for "
     r"\['a_0', 'a_1', 'a_2', 'a_3'\]"),
    (f"{__name__}:wide_crowd",
     r"env '[\w.]+:wide_crowd': agent 'a_0' has observation space Box\(-1e\+06, 1e\+06, "
     r"\(3,\), float32\) and action space Discrete\(2\), but the policies were made for "
     r"Box\(-1e\+06, 1e\+06, \(2,\), float32\) and Discrete\(2\)"),
])
def test_an_env_with_other_spaces_names_what_it_has_and_what_the_policies_need(
        crowd_run, env_id, message):
    before = sorted(p.name for p in crowd_run.rglob("*"))
    with pytest.raises(ConfigError, match=message):
        evaluate(crowd_run, env_id=env_id, episodes=1)
    assert sorted(p.name for p in crowd_run.rglob("*")) == before  # nothing written or lost


def test_eval_writes_the_scores(crowd_run):
    report = evaluate(crowd_run, episodes=2)
    saved = json.loads((crowd_run / "eval.json").read_text())
    assert saved == report and report["episodes"] == 2

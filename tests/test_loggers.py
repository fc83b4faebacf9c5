"""log.loggers: the built-in loggers by name, and a user's own ``module:Class``."""

from __future__ import annotations

import warnings

import own_loggers
import pytest
from helpers import read_metrics

from interplay.config.loading import load
from interplay.errors import ConfigError
from interplay.experiment.loop import train

TINY = ["env.id=spread", "env.num_envs=2", "train.steps=200", "log.every=100",
        "log.curve=false", "checkpoint.at_end=false"]


@pytest.fixture(autouse=True)
def _fresh():
    for kept in (own_loggers.BUILT, own_loggers.ROWS, own_loggers.CLOSED):
        kept.clear()


def test_a_users_logger_gets_every_row_of_metrics_jsonl_then_is_closed(tmp_path):
    train(load([], [*TINY, "log.loggers=[console, own_loggers:Rows]"]), tmp_path / "r")
    assert own_loggers.ROWS == read_metrics(tmp_path / "r")
    assert [r["env_steps"] for r in own_loggers.ROWS] == [100, 200]
    (run_dir, config), = own_loggers.BUILT
    assert run_dir == tmp_path / "r" and config["train"]["steps"] == 200
    assert own_loggers.CLOSED == [True]
    assert not (tmp_path / "r" / "tensorboard").exists()  # not in the list


@pytest.mark.parametrize(("overrides", "tensorboard"), [
    (["log.loggers=[tensorboard]"], True),
    (["log.loggers=[jsonl]"], False),
    (["log.loggers=[tensorboard]", "log.tensorboard=false"], False),  # the switch overrides
    (["log.loggers=[jsonl]", "log.tensorboard=true"], True),
    ([], True),  # no list: the switches' defaults
])
def test_the_list_names_the_built_in_loggers_and_a_switch_beside_it_wins(
        tmp_path, overrides, tensorboard):
    train(load([], [*TINY, "log.console=false", *overrides]), tmp_path / "r")
    assert (tmp_path / "r" / "tensorboard").exists() == tensorboard
    assert len(read_metrics(tmp_path / "r")) == 2  # metrics.jsonl is always written


def test_a_misspelt_logger_is_named_with_the_nearest_one():
    with pytest.raises(ConfigError, match=r"log.loggers\[1\]: 'tensorbord'.*did you mean 'tensorboard'"):
        load([], ["log.loggers=[console, tensorbord]"])


@pytest.mark.parametrize(("logger", "needle"), [
    ("own_loggers:NoWrite", "has no write method"),
    ("own_loggers:FailsToStart", "raised ValueError: no token"),
    ("own_loggers:Missing", "has no callable 'Missing'"),
])
def test_a_logger_that_cannot_work_is_named_before_any_step(tmp_path, logger, needle):
    with pytest.raises(ConfigError, match=needle):
        train(load([], [*TINY, f"log.loggers=[{logger}]"]), tmp_path / "r")
    assert not (tmp_path / "r" / "metrics.jsonl").exists() or not read_metrics(tmp_path / "r")


def test_a_logger_that_raises_while_training_is_reported_once_and_left_out(tmp_path):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        train(load([], [*TINY, "log.console=false", "log.loggers=[own_loggers:Breaks]"]),
              tmp_path / "r")
    said = [str(w.message) for w in seen if "own_loggers:Breaks" in str(w.message)]
    assert len(said) == 1 and "the dashboard is down" in said[0]
    assert len(read_metrics(tmp_path / "r")) == 2

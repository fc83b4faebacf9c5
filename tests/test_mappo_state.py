"""MAPPO's centralised critic on the env's global state (``algo.state``).

``HiddenGoal`` hides a goal cell that no agent observes but its ``state()`` holds: a critic
that reads the state can tell good episodes from bad ones before they happen, one that reads
the joined observations cannot.
"""

from __future__ import annotations

import pytest
from helpers import read_metrics

from interplay.config.loading import load
from interplay.errors import ConfigError
from interplay.experiment.loop import Experiment, train

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false",
         "checkpoint.at_end=false"]
GOAL = "env.id=interplay.envs.toy:hidden_goal"


def mappo(*extra: str) -> list[str]:
    return [GOAL, "algo.name=mappo", "env.num_envs=8", "algo.rollout=32", "train.seed=0",
            *QUIET, *extra]


def test_the_critic_learns_the_returns_from_the_envs_state_and_not_from_observations(tmp_path):
    explained = {}
    for state in ("env", "observations"):
        run = tmp_path / state
        train(load([], mappo(f"algo.state={state}", "train.steps=8000", "log.every=8000")), run)
        rows = [r for r in read_metrics(run) if r["phase"] == "train"]
        explained[state] = rows[-1]["explained_variance/agent"]
    assert explained["env"] > 0.3, explained
    assert explained["env"] - explained["observations"] > 0.3, explained


def test_with_state_env_the_critic_is_built_on_the_envs_state(tmp_path):
    exp = Experiment(load([], mappo("algo.state=env", "train.steps=64")), tmp_path / "run")
    algo = exp.algo.of("agent")
    assert algo.env_state is not None
    assert algo.joint_dim == 3 + 2  # [episode, t, goal, two cells]
    exp.close()


def test_mappo_keeps_its_joined_observations_unless_asked(tmp_path):
    exp = Experiment(load([], mappo("train.steps=64")), tmp_path / "run")
    algo = exp.algo.of("agent")
    assert algo.env_state is None and algo.joint_dim == 2  # two agents' one-number views
    exp.close()


@pytest.mark.parametrize(("extra", "message"), [
    (["env.kwargs={with_state: false}"], r"algo.state is env .* declares no state_space"),
    (["env.id=spread"], r"algo.state is env .* it is one of the built-in batched envs"),
])
def test_state_env_is_refused_before_any_step_for_an_env_without_one(tmp_path, extra, message):
    with pytest.raises(ConfigError, match=message):
        Experiment(load([], mappo("algo.state=env", *extra)), tmp_path / "run")
    assert not (tmp_path / "run" / "metrics.jsonl").exists()

"""A training run survives env copies that raise: their partial episodes go, the rest stays exact."""

from __future__ import annotations

import pytest
from helpers import read_metrics

from interplay.cli import main
from interplay.config import load
from interplay.experiment import train


def two(obs, agent):
    return 2


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_flaky_env_episodes_that_finish_are_exact(tmp_path, vectorization):
    cfg = load([], ["env.id=faulty_envs:flaky_counter", "env.kwargs.p=0.05", "env.num_envs=4",
                    f"env.vectorization={vectorization}", "env.max_failures=50",
                    "train.steps=1200", "log.every=400", "log.console=false",
                    "policies.a.type=scripted", f"policies.a.fn={__name__}:two"])
    train(cfg, tmp_path)
    rows = read_metrics(tmp_path)
    # Each step pays a_i (t + 1) * (i + 1) + 1 over 6 steps: 27 and 48 for whole episodes.
    for row in rows:
        assert row["agent_return_min/a_0"] == row["agent_return_max/a_0"] == 27
        assert row["agent_return_min/a_1"] == row["agent_return_max/a_1"] == 48
        assert row["episode_len_mean"] == 6
    last = rows[-1]
    assert last["env_failures"] > 0 and last["episodes_dropped"] == last["env_failures"]
    assert last["episodes"] + last["episodes_dropped"] >= 1200 // 6 - 4


def test_a_learning_run_survives_flaky_copies(tmp_path):
    cfg = load([], ["env.id=faulty_envs:flaky_counter", "env.kwargs.p=0.05", "env.num_envs=4",
                    "env.max_failures=50", "algo.name=ippo", "train.steps=800",
                    "log.console=false"])
    result = train(cfg, tmp_path)
    assert result.env_steps == 800 and read_metrics(tmp_path)[-1]["env_failures"] > 0


def test_an_env_that_always_raises_stops_with_its_own_error(tmp_path, capsys):
    code = main(["train", "-s", "env.id=faulty_envs:flaky_counter", "-s", "env.kwargs.p=1.0",
                 "-s", "env.max_failures=3", "-s", "train.steps=100", "--run-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "flaky step" in err

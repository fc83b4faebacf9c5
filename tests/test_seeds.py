"""Seeds: the run's seed is checked, every seed derived for an env is below 2**31, and an env
that cannot run at all (every reset or every episode fails) stops the run with its own error."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import CLI_QUIET, read_metrics

from interplay.cli import main
from interplay.config.loading import load
from interplay.envs.copies import EnvCopies
from interplay.errors import ConfigError
from interplay.experiment.loop import train
from interplay.seeding import SEED_LIMIT, copy_seeds, derived_seed

QUIET = ["log.console=false", "log.curve=false", "log.tensorboard=false"]


@pytest.mark.parametrize("seed", [-1, 2**31, 2**32 - 1, 2**40])
def test_a_seed_out_of_range_is_a_config_error(seed, tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"train\.seed.*" + str(seed)):
        load([], [f"train.seed={seed}"])
    code = main(["train", "-s", f"train.seed={seed}", "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "train.seed" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("seed", "why"), [
    ("true", "not true or false"), ("off", "not true or false"),
    ("1.5", "fractional part"), ("abc", "unable to parse"), ("[1]", "valid integer"),
])
def test_a_seed_that_is_not_a_whole_number_is_a_config_error(seed, why, tmp_path, capsys):
    code = main(["train", "-s", f"train.seed={seed}", "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "train.seed" in err and why in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_the_largest_seed_is_accepted():
    assert load([], [f"train.seed={2**31 - 1}"]).train.seed == 2**31 - 1


@pytest.mark.parametrize("seed", [0, 1, 7, 2**31 - 1])
def test_every_derived_env_seed_is_below_2_31(seed):
    seeds = copy_seeds(seed, 512)
    assert all(0 <= s < SEED_LIMIT for s in seeds) and len(set(seeds)) == 512
    assert all(0 <= derived_seed(seed, "test", str(i)) < SEED_LIMIT for i in range(64))
    copies = EnvCopies(lambda: None, range(0), None)  # the derivation for rebuilt copies
    copies._entropy, copies._rebuilds = [s for s in seeds[:64]], [0] * 64
    rebuilt = [copies._derived_seed(i) for i in range(64)]
    assert all(0 <= s < SEED_LIMIT for s in rebuilt)
    # without the cut, about half of these would be 2**31 or more
    assert max(seeds) > SEED_LIMIT // 2


def test_an_env_that_takes_only_31_bit_seeds_runs_without_failures(tmp_path):
    cfg = load([], ["env.id=faulty_envs:seed_picky", "env.num_envs=8", "train.steps=480",
                    "log.every=240", "train.test_frequency=240", "train.test_episodes=4", *QUIET])
    result = train(cfg, tmp_path)
    rows = read_metrics(tmp_path)
    assert result.env_steps == 480
    assert all(r.get("env_failures", 0) == 0 for r in rows)
    assert [r["phase"] for r in rows].count("test") == 2


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_an_env_that_fails_every_episode_stops_with_its_own_error(tmp_path, capsys, vectorization):
    code = main(["train", "-s", "env.id=faulty_envs:fails_every_episode", "-s", "env.num_envs=2",
                 "-s", f"env.vectorization={vectorization}", "-s", "train.steps=100000",
                 "-s", "env.max_failures=3", *CLI_QUIET, "--run-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "fails_every_episode" in err and "RuntimeError: cannot step past t=3" in err
    assert "no episode finished" in err and "env.max_failures" in err


def test_an_env_whose_reset_always_fails_stops_with_its_own_error(tmp_path, capsys):
    code = main(["train", "-s", "env.id=faulty_envs:flaky_counter", "-s", "env.kwargs.reset_p=1.0",
                 "-s", "train.steps=1000", *CLI_QUIET, "--run-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "flaky_counter" in err and "RuntimeError: flaky reset" in err
    assert "reset()" in err


def test_failures_now_and_then_do_not_stop_the_run(tmp_path):
    # a step fails one time in five: failures come and go between finished episodes
    cfg = load([], ["env.id=faulty_envs:flaky_counter", "env.kwargs.p=0.2", "env.num_envs=2",
                    "env.max_failures=12", "train.steps=600", *QUIET])
    result = train(cfg, tmp_path)
    assert result.env_steps == 600 and read_metrics(tmp_path)[-1]["env_failures"] > 12


def test_eval_refuses_a_seed_out_of_range(tmp_path, capsys):
    train(load([], ["train.steps=50", "env.num_envs=2", *QUIET]), tmp_path)
    code = main(["eval", str(tmp_path), "--seed", "-1", "--episodes", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "--seed" in err and "Traceback" not in err
    np.testing.assert_equal(main(["eval", str(tmp_path), "--seed", "5", "--episodes", "1"]), 0)

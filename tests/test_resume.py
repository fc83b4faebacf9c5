"""Checkpoints and resume: 2N steps straight equal N steps, stop, resume to 2N, where the algorithm
matrix (tests/test_algo_matrix.py) does not reach: stacked frames, lingering agents, recurrent
states; and damaged checkpoints."""

from __future__ import annotations

import pytest
from faulty_envs import Lingering
from helpers import read_metrics

from interplay import register_env
from interplay.cli import main
from interplay.config.loading import load
from interplay.envs.toy import ShiftingCrowd
from interplay.experiment.loop import resume, train
from interplay.experiment.run_store.checkpoint import list_checkpoints

TIMING = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}


def _numbers(rows):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


@pytest.mark.parametrize(("env", "num_envs", "n", "extra"), [
    ("mpe2.simple_spread_v3", 2, 300, ["policies.agent.stack_size=2"]),
    # an agent finished mid-episode while the env's dicts still hold it
    ("lingering_resume", 2, 40, []),
    # recurrent policies: the actors' states (runner), the critics' carried states (algorithm)
    ("spread", 2, 250, ["algo.name=ippo", "algo.model.recurrent=gru", "algo.rollout=40", "algo.model.seq_len=8",
                        "train.batch_mode=truncate_episodes"]),
    pytest.param("pettingzoo.classic.connect_four_v3", 3, 300, [
        "algo.name=mappo", "algo.model.recurrent=lstm", "algo.rollout=30", "algo.model.seq_len=8"],
        marks=pytest.mark.slow),  # turn-based and recurrent: also in the matrix and DQN's tests
])
def test_resume_continues_exactly(tmp_path, env, num_envs, n, extra):
    register_env("crowd_resume", ShiftingCrowd)
    register_env("lingering_resume", Lingering)
    common = [f"env.id={env}", f"env.num_envs={num_envs}", "log.console=false",
              f"log.every={n // 3}", f"train.test_frequency={n // 2}", "train.test_episodes=3",
              "log.tensorboard=false", "log.curve=false", *extra]
    straight = train(load([], [*common, f"train.steps={2 * n}"]), tmp_path / "straight")
    train(load([], [*common, f"train.steps={n}"]), tmp_path / "split")
    resumed = resume(tmp_path / "split", [f"train.steps={2 * n}"])
    assert resumed.env_steps == straight.env_steps == 2 * n
    a, b = read_metrics(tmp_path / "straight"), read_metrics(tmp_path / "split")
    assert [r["phase"] for r in a] == [r["phase"] for r in b]
    assert _numbers(a) == _numbers(b)
    assert any(r["phase"] == "test" for r in a)


def test_a_damaged_checkpoint_is_named_and_the_previous_one_works(tmp_path, capsys):
    cfg = load([], ["env.id=spread", "env.num_envs=4", "train.steps=400", "log.every=100",
                    "checkpoint.every=200", "log.console=false", "log.curve=false"])
    train(cfg, tmp_path)
    older, newest = list_checkpoints(tmp_path)[-2:]
    state = newest / "state.pt"
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    code = main(["resume", str(tmp_path), "-s", "train.steps=600", "--checkpoint", str(newest)])
    err = capsys.readouterr().err
    assert code == 2 and str(state) in err and "Traceback" not in err
    code = main(["resume", str(tmp_path), "-s", "train.steps=600", "--checkpoint", str(older)])
    assert code == 0
    rows = read_metrics(tmp_path)
    assert rows[-1]["env_steps"] == 600
    assert [r["env_steps"] for r in rows] == [100, 200, 300, 400, 500, 600]


def test_resume_without_a_flag_skips_the_damaged_newest(tmp_path):
    cfg = load([], ["env.id=spread", "env.num_envs=4", "train.steps=400", "log.every=100",
                    "checkpoint.every=200", "log.console=false", "log.curve=false"])
    train(cfg, tmp_path)
    newest = list_checkpoints(tmp_path)[-1]
    (newest / "state.pt").write_bytes(b"not a checkpoint")
    with pytest.warns(UserWarning, match="step_000000000400"):
        result = resume(tmp_path, ["train.steps=500"])
    assert result.env_steps == 500


def test_early_stop_at_target(tmp_path):
    cfg = load([], ["env.id=spread", "env.num_envs=4", "train.steps=100000", "log.every=100",
                    "train.test_frequency=100", "train.test_episodes=4", "train.target=-1000",
                    "log.console=false", "log.curve=false"])
    result = train(cfg, tmp_path)
    assert result.stopped_early and result.env_steps == 100
    assert result.last_test["episode_return_mean"] >= -1000

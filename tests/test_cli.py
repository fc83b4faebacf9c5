"""The command line: bad input gets one clear line, not a traceback."""

from __future__ import annotations

import pytest
from helpers import read_metrics

from interplay.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr()


def test_train_writes_the_run_folder(tmp_path, capsys):
    code, out = run(capsys, "train", "-s", "train.steps=200", "-s", "log.every=100",
                    "-s", "env.id=mpe2.simple_spread_v3", "-s", "log.curve=false",
                    "-s", "log.tensorboard=false", "--run-dir", str(tmp_path / "r"))
    assert code == 0 and "run folder" in out.out
    assert (tmp_path / "r" / "config.yaml").read_text().count("simple_spread_v3") == 1
    rows = read_metrics(tmp_path / "r")
    assert [r["env_steps"] for r in rows] == [100, 200]
    keys = {"phase", "env_steps", "agent_steps", "episodes", "wall_s", "env_steps_per_s",
            "episode_return_mean", "episode_len_mean", "agent_return_mean/agent_0",
            "policy_return_mean/agent"}
    assert keys <= set(rows[-1])


@pytest.mark.parametrize(("argv", "needles"), [
    (["-s", "env.id=no_such_pkg.env_v0"], ["no_such_pkg.env_v0", "No module named 'no_such_pkg'"]),
    (["-s", "env.id=mpe2.simple_spread_v3", "-s", "policies.p.agents=[agent_0]"],
     ["['agent_1', 'agent_2']", "no policy"]),
    (["-s", "algo.name=ppq"], ["algo.name", "ppq"]),
    (["-s", "train.stepz=5"], ["train.stepz", "train.steps"]),
    (["-s", "env.id=mpe2.simple_spread_v3", "-s", "policies.agent.type=scripted",
      "-s", "policies.agent.fn=os:nothing_here"], ["policies.agent.fn", "nothing_here"]),
])
def test_bad_input_is_one_clear_message(tmp_path, capsys, argv, needles):
    code, out = run(capsys, "train", *argv, "--run-dir", str(tmp_path / "r"))
    assert code == 2
    assert "Traceback" not in out.err
    for needle in needles:
        assert needle in out.err
    assert not (tmp_path / "r" / "metrics.jsonl").exists()


def test_check_reports_a_broken_env_with_the_fix(capsys):
    code, out = run(capsys, "check", "broken_envs:nan_obs_env", "--cycles", "30")
    assert code == 1
    assert "NaN or inf" in out.out and "fix:" in out.out


def test_check_passes_a_good_env(capsys):
    code, out = run(capsys, "check", "interplay.envs.toy:shifting_crowd", "--cycles", "30")
    assert code == 0 and "passed" in out.out


def test_config_show_prints_docs(capsys):
    code, out = run(capsys, "config", "-s", "train.steps=7")
    assert code == 0 and "steps: 7" in out.out and "# Env steps to train for" in out.out

"""What a run leaves behind, and what eval makes of it."""

from __future__ import annotations

import io
import json
import pickle

import imageio.v2 as imageio
import pytest
from helpers import read_metrics

from interplay.cli import main
from interplay.config.loading import load
from interplay.experiment.evaluate import evaluate
from interplay.experiment.loop import train
from interplay.experiment.run_store.checkpoint import list_checkpoints


@pytest.fixture(scope="module")
def spread_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    cfg = load([], ["env.id=spread", "env.num_envs=8", "train.steps=4000", "log.every=1000",
                    "train.test_frequency=2000", "train.test_episodes=4",
                    "checkpoint.every=2000", "log.console=false"])
    train(cfg, run)
    return run


def test_the_run_folder_holds_everything(spread_run):
    names = {p.name for p in spread_run.iterdir()}
    assert {"config.yaml", "metrics.jsonl", "checkpoints", "curve.png", "tensorboard"} <= names
    assert any((spread_run / "tensorboard").iterdir())
    assert imageio.imread(spread_run / "curve.png").ndim == 3
    rows = read_metrics(spread_run)
    assert [r["phase"] for r in rows] == ["train", "train", "test", "train", "train", "test"]
    assert [p.name for p in list_checkpoints(spread_run)] == ["step_000000002000", "step_000000004000"]


def test_eval_on_the_original_env_with_a_gif(spread_run, tmp_path):
    gif = tmp_path / "out.gif"
    report = evaluate(spread_run, episodes=6, env_id="mpe2.simple_spread_v3", render=gif)
    saved = json.loads((spread_run / "eval.json").read_text())
    assert saved["episodes"] == 6 and saved["env"] == "mpe2.simple_spread_v3"
    assert saved["episode_len_mean"] == 25
    assert set(report) >= {"agent_return_mean/agent_0", "policy_return_mean/agent", "episode_return_mean"}
    frames = imageio.mimread(gif)
    assert len(frames) >= 20 and frames[0].ndim == 3


def test_eval_refuses_an_env_with_other_spaces(spread_run, capsys):
    code = main(["eval", str(spread_run), "--env", "mpe2.simple_speaker_listener_v4"])
    err = capsys.readouterr().err
    assert code == 2 and "policies were made for" in err


def test_eval_of_a_batched_env_renders_it(spread_run, tmp_path, capsys):
    code = main(["eval", str(spread_run), "--render", str(tmp_path / "x.gif"), "--episodes", "2"])
    assert code == 0 and len(imageio.mimread(tmp_path / "x.gif")) >= 20
    assert json.loads((spread_run / "eval.json").read_text())["render"] == str(tmp_path / "x.gif")


class Boom:
    def __reduce__(self):
        import os

        return (os.system, ("touch /tmp/interplay-pwned",))


def test_a_checkpoint_that_runs_code_is_refused(spread_run, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(spread_run, run)
    newest = list_checkpoints(run)[-1]
    (newest / "state.pt").write_bytes(pickle.dumps({"x": Boom()}))
    code = main(["resume", str(run), "--checkpoint", str(newest), "-s", "train.steps=5000"])
    err = capsys.readouterr().err
    assert code == 2 and "state.pt" in err
    import os

    assert not os.path.exists("/tmp/interplay-pwned")


def test_progress_bar_rate_is_training_speed_not_the_test_phase(tmp_path):
    from rich.console import Console

    from interplay.loggers.console import ConsoleLogger

    log = ConsoleLogger(1000, enabled=True, console=Console(file=io.StringIO()))
    log.report({"phase": "train", "env_steps": 500, "env_steps_per_s": 1234.0,
                "episode_return_mean": -3.0})
    log.report({"phase": "test", "env_steps": 500, "env_steps_per_s": 99999.0,
                "episode_return_mean": -1.0})
    fields = log.progress.tasks[0].fields
    log.close()
    assert fields["rate"] == "1,234"
    assert fields["latest"] == "train return -3.00 (sum over agents)  test return -1.00 (sum over agents)"

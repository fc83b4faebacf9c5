import sys
import types

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from interplay.loggers.base import scalars
from interplay.loggers.tensorboard import TensorBoardLogger
from interplay.loggers.wandb import WandbLogger

ROWS = [
    {"phase": "train", "env_steps": 100, "agent_steps": 200, "episodes": 3, "wall_s": 0.5,
     "episode_return_mean": 1.25, "agent_return_mean/agent_0": -0.5,
     "policy_return_mean/shared": np.float32(0.75), "episode_len_mean": None, "done": True,
     "note": "text"},
    {"phase": "test", "env_steps": 100, "episode_return_mean": 2.0, "agent_return_mean/agent_0": 1},
    {"phase": "train", "env_steps": 250, "episode_return_mean": None,
     "agent_return_mean/agent_0": 3.5},
]


def read_scalars(log_dir):
    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_rows_become_phase_scalars_at_env_steps(tmp_path):
    logger = TensorBoardLogger(tmp_path / "tb")
    for row in ROWS:
        logger.write(row)
    logger.close()
    assert read_scalars(tmp_path / "tb") == {
        "train/agent_steps": [(100, 200.0)],
        "train/episodes": [(100, 3.0)],
        "train/wall_s": [(100, 0.5)],
        "train/episode_return_mean": [(100, 1.25)],
        "train/agent_return_mean/agent_0": [(100, -0.5), (250, 3.5)],
        "train/policy_return_mean/shared": [(100, 0.75)],
        "test/episode_return_mean": [(100, 2.0)],
        "test/agent_return_mean/agent_0": [(100, 1.0)],
    }


def test_events_are_on_disk_before_close(tmp_path):
    logger = TensorBoardLogger(tmp_path)
    logger.write(ROWS[1])
    assert read_scalars(tmp_path)["test/episode_return_mean"] == [(100, 2.0)]
    logger.close()


def test_row_without_phase_or_step_is_named():
    with pytest.raises(ValueError, match="'env_steps'"):
        scalars({"phase": "train", "episode_return_mean": 1.0})
    with pytest.raises(ValueError, match="'phase'"):
        scalars({"env_steps": 3})


def test_wandb_missing_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ImportError, match=r"pip install 'interplay\[wandb\]'"):
        WandbLogger(tmp_path, "proj", {"seed": 1})


def test_wandb_logs_rows_against_env_steps(tmp_path, monkeypatch):
    calls = []

    class FakeRun:
        def define_metric(self, name, **kwargs):
            calls.append(("define_metric", name, kwargs))

        def log(self, data):
            calls.append(("log", data))

        def finish(self):
            calls.append(("finish",))

    def init(**kwargs):
        calls.append(("init", kwargs))
        return FakeRun()

    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=init))
    logger = WandbLogger(tmp_path / "run-1", "proj", {"seed": 1})
    logger.write(ROWS[2])
    logger.close()
    assert calls[0] == ("init", {"project": "proj", "config": {"seed": 1},
                                 "dir": str(tmp_path / "run-1"), "name": "run-1",
                                 "mode": "offline"})
    assert ("define_metric", "*", {"step_metric": "env_steps"}) in calls
    assert calls[-2:] == [("log", {"env_steps": 250, "train/agent_return_mean/agent_0": 3.5}),
                          ("finish",)]

"""A full disk: the error names the file and the OS error, and what is already saved stays whole."""

from __future__ import annotations

import errno
import json
import os

import pytest
from helpers import read_metrics

from interplay.cli import main
from interplay.config.loading import load
from interplay.errors import WriteError
from interplay.experiment.loop import resume, train
from interplay.experiment.run_store import checkpoint as checkpoint_mod
from interplay.experiment.run_store.checkpoint import list_checkpoints, verify_checkpoint
from interplay.loggers.jsonl import JsonlLogger

QUICK = ["env.id=spread", "env.num_envs=2", "log.every=50", "checkpoint.every=100",
         "log.console=false", "log.tensorboard=false", "log.curve=false"]
ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def fill_disk_at_row(monkeypatch, n: int) -> list[int]:
    """From the ``n``-th metrics row written from now on, a row's write gets half of it on disk, then ENOSPC."""
    real, rows = os.write, []

    def write(fd, data):
        if bytes(data[:10]) == b'{"phase": ':
            rows.append(fd)
            if len(rows) >= n:
                real(fd, data[: len(data) // 2])
                raise ENOSPC
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    return rows


def test_a_failed_row_is_cut_back_and_named(tmp_path, monkeypatch):
    path = tmp_path / "metrics.jsonl"
    log = JsonlLogger(path)
    log.write({"phase": "train", "env_steps": 1})
    fill_disk_at_row(monkeypatch, 1)
    with pytest.raises(WriteError, match=rf"cannot write {path}: No space left on device "
                                         r"\[ENOSPC\]; every row in it is whole"):
        log.write({"phase": "train", "env_steps": 2, "note": "x" * 1000})
    assert path.read_text() == '{"phase": "train", "env_steps": 1}\n'
    monkeypatch.undo()  # space freed: the next row follows the last whole one
    log.write({"phase": "test", "env_steps": 3})
    log.close()
    assert [json.loads(line)["env_steps"] for line in path.read_text().splitlines()] == [1, 3]


def test_a_short_write_is_completed(tmp_path, monkeypatch):
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real(fd, data[:7]))
    log = JsonlLogger(tmp_path / "m.jsonl")
    log.write({"phase": "train", "env_steps": 12345, "episode_return_mean": -1.5})
    log.close()
    monkeypatch.undo()
    assert json.loads((tmp_path / "m.jsonl").read_text()) == {
        "phase": "train", "env_steps": 12345, "episode_return_mean": -1.5}


def test_a_full_disk_in_training_is_named_and_loses_nothing_saved(tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    fill_disk_at_row(monkeypatch, 5)
    code = main(["train", *[a for s in QUICK for a in ("-s", s)], "-s", "train.steps=400",
                 "--run-dir", str(run)])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"cannot write {run / 'metrics.jsonl'}: No space left on device [ENOSPC]" in err
    rows = read_metrics(run)  # every line parses
    assert [r["env_steps"] for r in rows] == [50, 100, 150, 200]
    saved = list_checkpoints(run)
    assert [p.name for p in saved] == ["step_000000000100", "step_000000000200"]
    for path in saved:
        verify_checkpoint(path)
    assert resume(run, ["train.steps=300"]).env_steps == 300
    assert [r["env_steps"] for r in read_metrics(run)] == [50, 100, 150, 200, 250, 300]


def test_a_full_disk_at_a_checkpoint_is_named_and_keeps_the_earlier_ones(tmp_path, monkeypatch):
    run = tmp_path / "run"
    real, calls = checkpoint_mod.torch.save, []

    def save(obj, fh):
        calls.append(1)
        if len(calls) >= 2:
            fh.write(b"partial")
            raise ENOSPC
        real(obj, fh)

    monkeypatch.setattr(checkpoint_mod.torch, "save", save)
    with pytest.raises(WriteError, match=rf"cannot write {run / 'checkpoints'}: No space left "
                                         r"on device \[ENOSPC\]"):
        train(load([], [*QUICK, "train.steps=400"]), run)
    monkeypatch.undo()
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["step_000000000100"]
    verify_checkpoint(run / "checkpoints" / "step_000000000100")
    assert [r["env_steps"] for r in read_metrics(run)] == [50, 100, 150, 200]


def test_other_full_disk_errors_are_printed_without_a_traceback(tmp_path, monkeypatch, capsys):
    import interplay.experiment.loop as loop

    def plot(metrics, out):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out))

    monkeypatch.setattr(loop, "plot_curve", plot)
    run = tmp_path / "run"
    code = main(["train", "-s", "env.id=spread", "-s", "train.steps=50", "-s", "log.console=false",
                 "-s", "log.tensorboard=false", "--run-dir", str(run)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "No space left on device" in err and str(run / "curve.png") in err


def test_a_full_disk_under_tensorboard_is_named(tmp_path, monkeypatch):
    from interplay.loggers.tensorboard import TensorBoardLogger

    log = TensorBoardLogger(tmp_path / "tb")

    def flush():
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(log._writer, "flush", flush)
    with pytest.raises(WriteError, match=rf"cannot write {tmp_path / 'tb'}: No space left"):
        log.write({"phase": "train", "env_steps": 1, "x": 1.0})
    monkeypatch.undo()
    log.close()

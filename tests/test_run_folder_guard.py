"""One process at a time in a run folder, and a new run never mixed into an old one."""

from __future__ import annotations

import os
import re
import shutil

import pytest
from helpers import read_metrics

from interplay.cli import main
from interplay.config.loading import load
from interplay.experiment.loop import resume, train
from interplay.experiment.run_store.checkpoint import list_checkpoints
from interplay.experiment.run_store.run_folder import LOCK_FILE, RunFolderError, hold

QUICK = ["env.id=spread", "env.num_envs=2", "log.every=50", "log.console=false",
         "log.tensorboard=false", "log.curve=false"]


def quick(steps: int = 100, *extra: str):
    return load([], [*QUICK, f"train.steps={steps}", *extra])


def test_a_held_folder_is_refused_naming_it_and_the_holder(tmp_path):
    run = tmp_path / "run"
    train(quick(), run)
    before = (run / "metrics.jsonl").read_bytes(), (run / "config.yaml").read_bytes()
    with hold(run):  # the lock another process would hold; it names the holder by pid
        for attempt in (lambda: train(quick(), run, overwrite=True),
                        lambda: resume(run, ["train.steps=200"])):
            with pytest.raises(RunFolderError, match=rf"{re.escape(str(run))} is in use .*"
                                                     rf"pid {os.getpid()}\b"):
                attempt()
    assert ((run / "metrics.jsonl").read_bytes(), (run / "config.yaml").read_bytes()) == before
    assert resume(run, ["train.steps=200"]).env_steps == 200  # released on every way out


def test_the_lock_is_released_when_the_run_fails(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(Exception, match="no_such_module"):
        train(quick(100, "env.id=no_such_module.env_v0"), run)
    assert (run / LOCK_FILE).exists()  # it failed while holding the folder
    assert train(quick(), run).env_steps == 100


def test_a_run_that_fails_before_writing_leaves_no_folder(tmp_path):
    with pytest.raises(Exception, match="no_such_module"):
        train(quick(100, "env.id=no_such_module.env_v0"), tmp_path / "run")
    assert list(tmp_path.iterdir()) == []


def test_the_cli_names_the_holder(tmp_path, capsys):
    run = tmp_path / "run"
    with hold(run):
        code = main(["train", "-s", "env.id=spread", "-s", "train.steps=50", "-s",
                     "log.console=false", "--run-dir", str(run)])
        assert [p.name for p in run.iterdir()] == [LOCK_FILE]
    err = capsys.readouterr().err
    assert code == 2 and str(run) in err and f"pid {os.getpid()}" in err
    assert "Traceback" not in err


def test_resume_of_a_missing_folder_is_named(tmp_path):
    with pytest.raises(RunFolderError, match="no_such_run: no such run folder"):
        resume(tmp_path / "no_such_run")
    assert not (tmp_path / "no_such_run").exists()


def test_a_file_is_not_a_run_folder(tmp_path):
    (tmp_path / "f").write_text("mine")
    for attempt in (lambda: train(quick(), tmp_path / "f"), lambda: resume(tmp_path / "f")):
        with pytest.raises(RunFolderError, match=r"f is a file, not a run folder"):
            attempt()
    assert (tmp_path / "f").read_text() == "mine"


@pytest.mark.parametrize("leftover", ["config.yaml", "metrics.jsonl", "checkpoints",
                                      "tensorboard", "curve.png", "eval.json"])
def test_train_into_a_folder_with_a_run_is_refused(tmp_path, leftover):
    run = tmp_path / "run"
    train(quick(100, "log.tensorboard=true", "log.curve=true"), run)
    (run / "eval.json").write_text("{}")
    keep = {leftover}
    for p in list(run.iterdir()):
        if p.name not in keep and p.name != LOCK_FILE:
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink()
    before = sorted(str(p.relative_to(run)) for p in run.rglob("*"))
    with pytest.raises(RunFolderError, match=rf"{re.escape(str(run))} already holds a run "
                                             rf"\({leftover}\).*interplay resume .*--overwrite"):
        train(quick(), run)
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*")) == before


def test_the_cli_refuses_and_points_at_resume(tmp_path, capsys):
    run = tmp_path / "run"
    train(quick(), run)
    rows = read_metrics(run)
    code = main(["train", "-s", "env.id=spread", "-s", "train.steps=50", "-s",
                 "log.console=false", "--run-dir", str(run)])
    err = capsys.readouterr().err
    assert code == 2 and f"interplay resume {run}" in err and "--overwrite" in err
    assert read_metrics(run) == rows and [p.name for p in list_checkpoints(run)] == [
        "step_000000000100"]


def test_overwrite_deletes_the_old_run_and_only_it(tmp_path, capsys):
    run = tmp_path / "run"
    train(quick(300, "checkpoint.every=100", "log.tensorboard=true"), run)
    (run / "eval.json").write_text("{}")
    (run / "notes.txt").write_text("mine")
    code = main(["train", *[a for s in QUICK for a in ("-s", s)], "-s", "train.steps=100",
                 "--run-dir", str(run), "--overwrite"])
    assert code == 0, capsys.readouterr().err
    assert [r["env_steps"] for r in read_metrics(run)] == [50, 100]
    assert [p.name for p in list_checkpoints(run)] == ["step_000000000100"]
    assert not (run / "eval.json").exists() and not (run / "tensorboard").exists()
    assert (run / "notes.txt").read_text() == "mine"


def test_an_empty_or_unrelated_folder_is_fine(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert train(quick(), empty).env_steps == 100
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    assert train(quick(), mine).env_steps == 100
    assert (mine / "notes.txt").read_text() == "mine"


def test_runs_without_a_folder_get_one_each(tmp_path):
    cfg = quick(50, f"log.dir={tmp_path}")
    a, b = train(cfg), train(cfg)
    assert a.run_dir != b.run_dir and a.run_dir.parent == b.run_dir.parent == tmp_path


@pytest.fixture(scope="module")
def linked_base(tmp_path_factory):
    run = tmp_path_factory.mktemp("links") / "run"
    train(quick(100), run)
    return run


def _checkpoint_file(run):
    return next((run / "checkpoints").iterdir()).relative_to(run) / "state.pt"


@pytest.mark.parametrize("name", [LOCK_FILE, "metrics.jsonl", "config.yaml", "checkpoints",
                                  "eval.json", "curve.png", "league.jsonl", ".eval.json.tmp",
                                  "checkpoint file"])
@pytest.mark.parametrize("target", ["outside file", "dangling", "loop"])
@pytest.mark.parametrize("command", ["resume", "eval", "train --overwrite"])
def test_a_symlink_where_interplay_writes_is_refused_by_name(linked_base, tmp_path, capsys, name,
                                                             target, command):
    run = tmp_path / "run"
    shutil.copytree(linked_base, run)
    name = str(_checkpoint_file(run)) if name == "checkpoint file" else name
    link = run / name
    outside = tmp_path / "outside"
    outside.write_bytes(b"precious")
    if link.is_dir():
        shutil.rmtree(link)
    else:
        link.unlink(missing_ok=True)
    link.symlink_to({"outside file": outside, "dangling": tmp_path / "gone" / "x",
                     "loop": link}[target])
    argv = {"resume": ["resume", str(run), "-s", "train.steps=200"],
            "eval": ["eval", str(run), "--episodes", "1"],
            "train --overwrite": ["train", *[p for o in QUICK for p in ("-s", o)], "-s",
                                  "train.steps=100", "--run-dir", str(run), "--overwrite"]}[command]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert f"{link} is a symbolic link" in err
    assert outside.read_bytes() == b"precious" and link.is_symlink()
    assert not (tmp_path / "gone").exists()


def test_the_users_own_links_in_a_run_folder_are_left_alone(linked_base, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(linked_base, run)
    (run / "notes.txt").symlink_to(tmp_path)
    assert resume(run, ["train.steps=200"]).env_steps == 200

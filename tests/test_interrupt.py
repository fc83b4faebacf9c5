"""SIGINT and SIGTERM end a run in a checkpoint that resume continues from, leaving nothing behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import QUIET, read_metrics

from interplay.config.loading import load
from interplay.experiment.loop import resume, train
from interplay.experiment.run_store.checkpoint import verify_checkpoint
from interplay.experiment.run_store.interrupt import Interrupted, StopRequest
from interplay.experiment.run_store.run_folder import RunFolderError
from interplay.run.callbacks import Callbacks

SRC = Path(__file__).parent.parent / "src"
COMMON = ["train.steps=-1", "log.every=100", "log.console=false", "log.curve=false",
          "algo.name=ippo", "algo.rollout=25"]
CASES = {
    # in-process copies: the resumed run is the run that never stopped
    "SIGINT": ["env.id=spread", "env.num_envs=4"],
    # copies in a worker process (multiprocessing makes its /tmp/pymp-* folder for them)
    "SIGTERM": ["env.id=interplay.envs.toy:shifting_crowd", "env.num_envs=2",
                "env.vectorization=async", "env.num_workers=1"],
}
TIMING = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}
PATIENCE_S = 240  # a loaded machine takes seconds to start Python, torch and env workers


def wait_for(what, proc: subprocess.Popen, check) -> None:
    end = time.monotonic() + PATIENCE_S
    while not check():
        if proc.poll() is not None:
            raise AssertionError(f"train exited with {proc.returncode} before {what}: "
                                 f"{proc.stderr.read()}")
        if time.monotonic() > end:
            raise AssertionError(f"no {what} within {PATIENCE_S} s")
        time.sleep(0.05)


def rows_written(run: Path, n: int):
    def check() -> bool:
        path = run / "metrics.jsonl"
        return path.exists() and path.read_text().count("\n") >= n
    return check


@pytest.fixture
def short_tmp():
    """A temp folder with a short path: worker processes put sockets there, whose paths may
    not pass 107 bytes (a test's tmp_path under pytest-xdist can)."""
    with tempfile.TemporaryDirectory(prefix="ip-") as folder:
        yield Path(folder)


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize("how", [
    "SIGINT",
    pytest.param("SIGTERM", marks=pytest.mark.slow),  # starts env workers twice: 10-30 s
])
def test_a_signal_ends_the_run_in_a_checkpoint_that_resume_continues(tmp_path, short_tmp, how):
    run, tmp = tmp_path / "run", short_tmp
    settings = [*CASES[how], *COMMON]
    env = {**os.environ, "PYTHONPATH": str(SRC), "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "interplay.cli", "train", *[a for s in settings for a in ("-s", s)],
         "--run-dir", str(run)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for("three metrics rows", proc, rows_written(run, 3))
        if "env.vectorization=async" in settings:
            assert list(tmp.glob("pymp-*"))  # there is something to clean up
        # The folder is held: neither a second train nor a resume may write into it.
        with pytest.raises(RunFolderError, match=rf"in use .*\(pid {proc.pid}\)"):
            resume(run)
        with pytest.raises(RunFolderError, match=rf"in use .*\(pid {proc.pid}\)"):
            train(load([], settings), run, overwrite=True)
        proc.send_signal(getattr(signal, how))
        code = proc.wait(timeout=PATIENCE_S)
        err = proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    assert code == 128 + getattr(signal, how), err
    found = re.search(r"stopped by (\w+) at env step (\d+); checkpoint written to (\S+); "
                      r"continue with: interplay resume (\S+)", err)
    assert found, err
    assert found[1] == how and found[4] == str(run)
    stopped_at = int(found[2])
    assert Path(found[3]) == run / "checkpoints" / f"step_{stopped_at:012d}"
    # Only the checkpoint written at the interruption (checkpoint.every is 0): no temp folders.
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [f"step_{stopped_at:012d}"]
    verify_checkpoint(Path(found[3]))
    assert not list(tmp.glob("pymp-*")), "multiprocessing's temporary folders were left behind"
    rows = read_metrics(run)
    assert len(rows) >= 3 and all(r["env_steps"] <= stopped_at for r in rows)

    target = stopped_at + 240  # a whole number of steps of every copy
    result = resume(run, [f"train.steps={target}"])
    assert result.env_steps == target
    after = [r["env_steps"] for r in read_metrics(run) if r["phase"] == "train"]
    assert after[: len(rows)] == [r["env_steps"] for r in rows]
    assert after == sorted(set(after)) and after[-1] == target
    if how == "SIGINT":  # exact: the same rows as a run that was never stopped
        straight = train(load([], [*settings, f"train.steps={target}"]), tmp_path / "straight")
        strip = lambda rs: [{k: v for k, v in r.items() if k not in TIMING} for r in rs]  # noqa: E731
        assert strip(read_metrics(run)) == strip(straight.rows)


class SignalAt(Callbacks):
    """Sends this process ``signum`` once the run has passed ``env_steps``."""

    def __init__(self, signum: int, env_steps: int, times: int = 1):
        self.signum, self.env_steps, self.times = signum, env_steps, times

    def on_episode_step(self, *, runner, **kw) -> None:
        if self.times and runner.env_steps >= self.env_steps:
            self.times -= 1
            os.kill(os.getpid(), self.signum)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_in_process_a_signal_ends_in_a_checkpoint_and_resume_is_exact(tmp_path, signum):
    settings = ["env.id=spread", "env.num_envs=4", "log.every=100", "log.console=false",
                "log.curve=false", "algo.name=ippo", "algo.rollout=25", "checkpoint.every=200"]
    run = tmp_path / "run"
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with pytest.raises(Interrupted) as stopped:
        train(load([], [*settings, "train.steps=100000"]), run, callbacks=[SignalAt(signum, 330)])
    at = stopped.value.env_steps
    assert 330 <= at < 400 and stopped.value.signum == signum
    assert stopped.value.checkpoint == run / "checkpoints" / f"step_{at:012d}"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "step_000000000200", f"step_{at:012d}"]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    resumed = resume(run, ["train.steps=600"])
    straight = train(load([], [*settings, "train.steps=600"]), tmp_path / "straight")
    strip = lambda rs: [{k: v for k, v in r.items() if k not in TIMING} for r in rs]  # noqa: E731
    assert resumed.env_steps == 600 and strip(read_metrics(run)) == strip(straight.rows)


def test_a_second_signal_stops_at_once_without_a_checkpoint(tmp_path):
    run = tmp_path / "run"
    settings = ["env.id=spread", "env.num_envs=4", *QUIET, "train.steps=100000"]
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(Interrupted, match="stopped by SIGINT without writing a checkpoint"):
        train(load([], settings), run, callbacks=[SignalAt(signal.SIGINT, 100, times=2)])
    assert not (run / "checkpoints").exists()
    assert signal.getsignal(signal.SIGINT) == before


def test_outside_the_loop_a_signal_stops_at_once_and_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted, match="stopped by SIGTERM without writing a checkpoint"), \
            StopRequest():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises at once
    assert signal.getsignal(signal.SIGTERM) is before


def test_inside_the_loop_the_first_signal_is_deferred_and_a_second_stops_at_once(capsys):
    before = signal.getsignal(signal.SIGINT)
    with StopRequest() as stop, stop.deferring():
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested and stop.signum == signal.SIGINT
        assert "stopping after this step" in capsys.readouterr().err
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
    assert signal.getsignal(signal.SIGINT) == before



def test_a_deferred_sigterm_leaves_env_workers_running():
    # a SIGTERM that arrives during a step must not close the env workers under a run that
    # stops after that step: the step, the checkpoint and the clean-up still need them
    from test_async_vec import random_actions

    from interplay.envs.async_vec import AsyncVecEnv
    from interplay.envs.registry import env_factory
    from interplay.experiment.run_store.interrupt import StopRequest

    with StopRequest() as stop, stop.deferring(), \
            AsyncVecEnv(env_factory("interplay.envs.toy:shifting_crowd"), 2, num_workers=1) as env:
        step = env.reset(0)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested
        rng = np.random.default_rng(0)
        for _ in range(3):
            step = env.step(random_actions(env, step, rng))
        assert step.acting.any()

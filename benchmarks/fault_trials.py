"""Repeated trials of each fault a training run is meant to survive, on small real runs.

Prints one JSON line per fault: ``trials``, ``survived``, ``episodes_dropped`` (summed over the
trials, from the last row of each run's ``metrics.jsonl``), ``exact`` (every finished episode
paid exactly what the env pays; null where no episode is checked), ``leftovers`` (processes
started under this one and ``interplay_<pid>_*`` segments in /dev/shm still there after a
trial), ``seconds`` and ``problems`` (what went wrong in the trials that did not survive).
``--markdown`` adds the table. A trial counts as survived only if its fault really happened.

The faults, and what surviving means:

- ``step_raises_*``, ``reset_raises_*``: FlakyCounter copies raise in ``step`` (p=0.05) or
  ``reset`` (reset_p=0.2), sync and async; the run finishes.
- ``worker_killed``: three SIGKILLs of an async worker in a run (from a callback, between
  steps); the run finishes and every kill shows up as a worker restart.
- ``worker_hangs``: a Hanging copy sleeps in ``step`` twice in a run, ``env.step_timeout_s``
  is 1; the run finishes and every hang shows up as a worker restart.
- ``nan_reward_*``: one agent is paid NaN; ``interplay train`` exits with code 2 and an error
  naming the agent, its policy and the env step, without a traceback.
- ``checkpoint_truncated``: the newest checkpoint's state.pt is cut short; ``resume`` warns,
  falls back to the one before and completes the run.
- ``checkpoint_runs_code``: state.pt is a pickle whose ``__reduce__`` creates a marker file,
  the manifest rewritten to match; ``interplay resume`` exits with code 2 saying it refused,
  and the marker does not exist.
- ``config_typo``: one misspelt key per section in a YAML file; ``interplay train`` exits
  with code 2 naming the dotted key, and makes no run folder.

Every finished FlakyCounter episode with the scripted action 2 pays ``a_0`` 27 and ``a_1`` 48.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import hashlib
import io
import json
import os
import pickle
import random
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from interplay.cli import main as cli
from interplay.config.loading import load
from interplay.envs.async_vec import AsyncVecEnv
from interplay.experiment.loop import resume, train
from interplay.experiment.run_store.checkpoint import list_checkpoints, verify_checkpoint
from interplay.run.callbacks import Callbacks

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from faulty_envs import flaky_counter  # noqa: E402

WHOLE = {"a_0": 27.0, "a_1": 48.0}
LENGTH = 6
QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
SCRIPTED = ["env.id=faulty_envs:flaky_counter", "env.num_envs=4", "env.max_failures=10",
            "policies.a.type=scripted", f"policies.a.fn={__name__}:two",
            "train.steps=2400", "log.every=600", "checkpoint.at_end=false", *QUIET]
ASYNC = ["env.vectorization=async", "env.num_workers=2"]
SETTLE_S = 5.0  # how long a trial's processes and segments may take to go after it ends


def two(obs: Any, agent: str) -> int:
    return 2


@dataclass
class Outcome:
    survived: bool
    dropped: int = 0
    exact: bool | None = None
    problem: str = ""


@dataclass
class Tally:
    fault: str
    trials: int = 0
    survived: int = 0
    episodes_dropped: int = 0
    exact: bool | None = None
    leftovers: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def add(self, seed: int, outcome: Outcome, leftovers: list[str]) -> None:
        self.trials += 1
        self.survived += outcome.survived
        self.episodes_dropped += outcome.dropped
        if outcome.exact is not None:
            self.exact = outcome.exact and self.exact is not False
        self.leftovers += len(leftovers)
        if outcome.problem:
            self.problems.append(f"seed {seed}: {outcome.problem}")
        if leftovers:
            self.problems.append(f"seed {seed}: left behind {', '.join(leftovers)}")

    def row(self) -> dict[str, Any]:
        return {"fault": self.fault, "trials": self.trials, "survived": self.survived,
                "episodes_dropped": self.episodes_dropped, "exact": self.exact,
                "leftovers": self.leftovers, "seconds": round(self.seconds, 1),
                "problems": self.problems}


# -- what a trial leaves behind -----------------------------------------------------------

def descendants() -> set[int]:
    """Live (not zombie) processes below this one."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid = stat.read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, IndexError, ValueError):
            continue
        if state != "Z":
            parent[int(stat.parent.name)] = int(ppid)
    found: set[int] = set()
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        kids = [c for c, p in parent.items() if p == pid]
        found.update(kids)
        todo.extend(kids)
    return found


def segments() -> set[str]:
    return {p.name for p in Path("/dev/shm").glob(f"interplay_{os.getpid()}_*")}


def left_behind(procs: set[int], segs: set[str]) -> list[str]:
    """What appeared since ``procs`` and ``segs`` were taken and is still there after a grace."""
    end = time.monotonic() + SETTLE_S
    while True:
        new_procs, new_segs = descendants() - procs, segments() - segs
        if not (new_procs or new_segs) or time.monotonic() > end:
            break
        time.sleep(0.05)
    return [*(f"process {p}" for p in sorted(new_procs)), *(f"/dev/shm/{s}" for s in sorted(new_segs))]


def start_helpers() -> None:
    """Start multiprocessing's forkserver and resource tracker, which live as long as this
    script, so that the first async trial is not charged with them."""
    with AsyncVecEnv(lambda: flaky_counter(p=0.0), 1, num_workers=1) as env:
        env.reset(0)


# -- run helpers ---------------------------------------------------------------------------

class Episodes(Callbacks):
    """Checks every finished episode against what the env pays for whole episodes; the
    subclasses set their fault off between episodes."""

    def __init__(self) -> None:
        self.finished = 0
        self.wrong: list[str] = []
        self.first_end: int | None = None

    def on_episode_end(self, *, episode: Any, env_index: int, runner: Any) -> None:
        self.finished += 1
        if self.first_end is None:
            self.first_end = runner.env_steps
        if episode.returns != WHOLE or episode.length != LENGTH:
            self.wrong.append(f"copy {env_index}: {episode.returns} in {episode.length} steps")


class Killer(Episodes):
    """SIGKILLs one async worker, picked at random, once the run passes each of ``at``."""

    def __init__(self, at: list[int], seed: int):
        super().__init__()
        self.at = list(at)
        self.rng = random.Random(seed)
        self.kills = 0

    def on_episode_end(self, *, episode: Any, env_index: int, runner: Any) -> None:
        super().on_episode_end(episode=episode, env_index=env_index, runner=runner)
        if self.at and runner.env_steps >= self.at[0]:
            self.at.pop(0)
            os.kill(self.rng.choice(runner.env.worker_pids()), signal.SIGKILL)
            self.kills += 1


class Trigger(Episodes):
    """Creates the Hanging env's trigger file once the run passes each of ``at``."""

    def __init__(self, at: list[int], trigger: Path):
        super().__init__()
        self.at = list(at)
        self.trigger = trigger
        self.pulled = 0

    def on_episode_end(self, *, episode: Any, env_index: int, runner: Any) -> None:
        super().on_episode_end(episode=episode, env_index=env_index, runner=runner)
        if self.at and runner.env_steps >= self.at[0] and not self.trigger.exists():
            self.at.pop(0)
            self.trigger.touch()
            self.pulled += 1


def last_row(run_dir: Path) -> dict[str, Any]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return next(r for r in map(json.loads, reversed(lines)) if r["phase"] == "train")


def run_cli(argv: list[str]) -> tuple[int, str]:
    """``interplay ARGV`` in this process: its exit code and what it wrote to stderr."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = cli(argv)
    return code, err.getvalue()


def scripted_run(seed: int, overrides: list[str], watch: Episodes,
                 check: Callable[[dict[str, Any]], str]) -> Outcome:
    """Train the scripted FlakyCounter run; ``check`` says what is wrong with its last row."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cfg = load([], [*SCRIPTED, f"train.seed={seed}", *overrides])
        result = train(cfg, run_dir, callbacks=[watch])
        row = last_row(run_dir)
    problems = [p for p in (
        check(row),
        "" if result.env_steps >= cfg.train.steps else f"stopped at env step {result.env_steps}",
        "" if watch.finished else "no episode finished",
    ) if p]
    survived = not problems
    if watch.wrong:
        problems.append(f"{len(watch.wrong)} episodes paid wrongly, first {watch.wrong[0]}")
    return Outcome(survived, row.get("episodes_dropped", 0), not watch.wrong, "; ".join(problems))


# -- the trials ----------------------------------------------------------------------------

def env_raises(where: str, vectorization: str) -> Callable[[int], Outcome]:
    kwargs = "env.kwargs.p=0.05" if where == "step" else "env.kwargs.reset_p=0.2"
    extra = [kwargs] + (ASYNC if vectorization == "async" else [])
    if where == "reset":
        extra.append("env.kwargs.p=0.0")

    def check(row: dict[str, Any]) -> str:
        return "" if row["env_failures"] > 0 else "the env never raised"

    return lambda seed: scripted_run(seed, extra, Episodes(), check)


def worker_killed(seed: int) -> Outcome:
    killer = Killer([600, 1200, 1800], seed)

    def check(row: dict[str, Any]) -> str:
        if killer.kills != 3 or row["worker_restarts"] != killer.kills:
            return f"{killer.kills} kills, {row['worker_restarts']} worker restarts"
        return ""

    return scripted_run(seed, ["env.kwargs.p=0.0", *ASYNC], killer, check)


def worker_hangs(seed: int) -> Outcome:
    with tempfile.TemporaryDirectory() as tmp:
        trigger = Path(tmp) / "hang"
        hanger = Trigger([800 + 40 * seed, 1600], trigger)

        def check(row: dict[str, Any]) -> str:
            if hanger.pulled != 2 or row["worker_restarts"] != 2 or trigger.exists():
                return (f"{hanger.pulled} hangs, {row['worker_restarts']} worker restarts, "
                        f"trigger left: {trigger.exists()}")
            return ""

        return scripted_run(seed, ["env.id=faulty_envs:hanging", f"env.kwargs.trigger={trigger}",
                                   "env.step_timeout_s=1", *ASYNC], hanger, check)


def nan_reward(vectorization: str) -> Callable[[int], Outcome]:
    def trial(seed: int) -> Outcome:
        after = 30 + 7 * seed
        with tempfile.TemporaryDirectory() as tmp:
            code, err = run_cli([
                "train", "-s", "env.id=faulty_envs:nan_reward", "-s", f"env.kwargs.after={after}",
                "-s", "env.num_envs=2", "-s", f"env.vectorization={vectorization}",
                "-s", "env.num_workers=2", "-s", "algo.name=ippo",
                "-s", "policies.pair.agents=[a_0, a_1]", "-s", "train.steps=600",
                "-s", f"train.seed={seed}", *(a for s in QUIET for a in ("-s", s)),
                "--run-dir", str(Path(tmp) / "run")])
        want = ["reward of agent 'a_1' (policy 'pair')", f"at env step {2 * (after + 1)}"]
        ok = code == 2 and all(w in err for w in want) and "Traceback" not in err
        return Outcome(ok, problem="" if ok else f"exit code {code}: {err.strip()[-600:]}")

    return trial


def checkpoint_truncated(seed: int) -> Outcome:
    run = ["env.id=faulty_envs:flaky_counter", "env.kwargs.p=0.0", "env.num_envs=4",
           "algo.name=ippo", "algo.rollout=25", "algo.epochs=2", f"train.seed={seed}",
           "train.steps=600", "log.every=200", "checkpoint.every=200", *QUIET]
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        train(load([], run), run_dir)
        newest = list_checkpoints(run_dir)[-1]
        state = newest / "state.pt"
        data = state.read_bytes()
        state.write_bytes(data[:random.Random(seed).randrange(1, len(data))])
        watch = Episodes()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = resume(run_dir, ["train.steps=1000"], callbacks=[watch])
        said = [str(w.message) for w in caught]
        fresh = list_checkpoints(run_dir)[-1]
        verify_checkpoint(fresh)
        dropped = last_row(run_dir).get("episodes_dropped", 0)
    problems = []
    if not any(str(newest) in s and "truncated" in s for s in said):
        problems.append(f"no warning naming the truncated checkpoint; warnings: {said}")
    if watch.first_end is None or not 400 < watch.first_end <= 400 + 4 * LENGTH:
        problems.append(f"first episode after resuming ended at env step {watch.first_end}, "
                        "not within one episode of the step-400 checkpoint")
    if result.env_steps != 1000 or fresh.name != "step_000000001000":
        problems.append(f"ended at env step {result.env_steps}, newest checkpoint {fresh.name}")
    return Outcome(not problems, dropped, problem="; ".join(problems))


class RunsCode:
    def __init__(self, call: Callable[..., Any], args: tuple):
        self.call = call
        self.args = args

    def __reduce__(self) -> tuple[Callable[..., Any], tuple]:
        return self.call, self.args


PAYLOADS: list[tuple[str, Callable[[Path], RunsCode]]] = [
    ("pickle", lambda m: RunsCode(os.system, (f"touch '{m}'",))),
    ("torch.save", lambda m: RunsCode(os.system, (f"touch '{m}'",))),
    ("pickle", lambda m: RunsCode(builtins.exec, (f"open({str(m)!r}, 'w').close()",))),
    ("torch.save", lambda m: RunsCode(subprocess.call, (["touch", str(m)],))),
    ("pickle", lambda m: RunsCode(builtins.eval, (f"open({str(m)!r}, 'w').close()",))),
]


def checkpoint_runs_code(seed: int) -> Outcome:
    writer, payload = PAYLOADS[seed % len(PAYLOADS)]
    with tempfile.TemporaryDirectory() as tmp:
        probe, marker = Path(tmp) / "probe", Path(tmp) / "marker"
        pickle.loads(pickle.dumps(payload(probe)))  # noqa: S301 - proves the payload runs code
        if not probe.exists():
            return Outcome(False, problem=f"the {writer} payload does not run code when unpickled")
        run_dir = Path(tmp) / "run"
        train(load([], [*SCRIPTED, "train.steps=200", "checkpoint.at_end=true",
                        f"train.seed={seed}"]), run_dir)
        state = list_checkpoints(run_dir)[-1] / "state.pt"
        if writer == "pickle":
            state.write_bytes(pickle.dumps({"format": 1, "x": payload(marker)}, protocol=2 + seed % 4))
        else:
            torch.save({"format": 1, "x": payload(marker)}, state)
        rehash(state.parent)
        code, err = run_cli(["resume", str(run_dir)])
        ran = marker.exists()
    ok = code == 2 and "refused to load" in err and str(state) in err and not ran
    ok = ok and "Traceback" not in err
    return Outcome(ok, problem="" if ok else
                   f"exit code {code}, marker created: {ran}: {err.strip()[-600:]}")


def rehash(folder: Path) -> None:
    """Make the manifest match the crafted state.pt, as whoever crafted it would."""
    data = (folder / "state.pt").read_bytes()
    manifest_path = folder / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["files"]["state.pt"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    manifest_path.write_text(json.dumps(manifest))


TYPOS = [
    ("env.num_env", {"env": {"num_env": 2}}),
    ("algo.lrr", {"algo": {"name": "ippo", "lrr": 3e-4}}),
    ("policies.pair.stack", {"policies": {"pair": {"agents": ["a_0", "a_1"], "stack": 2}}}),
    ("train.stepz", {"train": {"stepz": 100}}),
    ("log.evry", {"log": {"evry": 10}}),
    ("checkpoint.evry", {"checkpoint": {"evry": 5}}),
]


def config_typo(seed: int) -> Outcome:
    key, typo = TYPOS[seed % len(TYPOS)]
    data: dict[str, Any] = {"env": {"id": "faulty_envs:flaky_counter", "num_envs": 2},
                            "algo": {"name": "ippo"}, "train": {"steps": 100, "seed": seed},
                            "log": {"console": False, "tensorboard": False, "curve": False}}
    for section, values in typo.items():
        data[section] = {**data.get(section, {}), **values}
    with tempfile.TemporaryDirectory() as tmp:
        path, run_dir = Path(tmp) / "typo.yaml", Path(tmp) / "run"
        path.write_text(json.dumps(data))  # JSON is YAML
        code, err = run_cli(["train", str(path), "--run-dir", str(run_dir)])
        made = run_dir.exists()
    ok = code == 2 and f"{key}: unknown key" in err and "Traceback" not in err and not made
    return Outcome(ok, problem="" if ok else
                   f"exit code {code}, run folder made: {made}: {err.strip()[-600:]}")


FAULTS: dict[str, tuple[Callable[[int], Outcome], int]] = {
    "step_raises_sync": (env_raises("step", "sync"), 5),
    "step_raises_async": (env_raises("step", "async"), 5),
    "reset_raises_sync": (env_raises("reset", "sync"), 5),
    "reset_raises_async": (env_raises("reset", "async"), 5),
    "worker_killed": (worker_killed, 5),
    "worker_hangs": (worker_hangs, 5),
    "nan_reward_sync": (nan_reward("sync"), 5),
    "nan_reward_async": (nan_reward("async"), 5),
    "checkpoint_truncated": (checkpoint_truncated, 5),
    "checkpoint_runs_code": (checkpoint_runs_code, 5),
    "config_typo": (config_typo, len(TYPOS)),
}


def run_fault(name: str, trial: Callable[[int], Outcome], trials: int) -> Tally:
    tally = Tally(name)
    start = time.perf_counter()
    for seed in range(trials):
        procs, segs = descendants(), segments()
        try:
            outcome = trial(seed)
        except Exception as err:
            text = "".join(traceback.format_exception_only(err)).strip()
            outcome = Outcome(False, problem=f"raised {text[-800:]}")
        tally.add(seed, outcome, left_behind(procs, segs))
    tally.seconds = time.perf_counter() - start
    return tally


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| fault | trials | survived | episodes dropped | leftovers |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['fault']} | {r['trials']} | {r['survived']} | {r['episodes_dropped']} | "
              f"{r['leftovers']} |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=list(FAULTS), help="run these faults only")
    parser.add_argument("--trials", type=int, help="trials per fault (default: 5, typos: 6)")
    parser.add_argument("--markdown", action="store_true", help="also print a markdown table")
    args = parser.parse_args()
    torch.set_num_threads(1)
    start_helpers()
    rows = []
    for name in args.only or FAULTS:
        trial, trials = FAULTS[name]
        rows.append(run_fault(name, trial, args.trials or trials).row())
        print(json.dumps(rows[-1]), flush=True)
    if args.markdown:
        print(markdown(rows))


if __name__ == "__main__":
    main()

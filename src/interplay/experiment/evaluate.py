"""``interplay eval RUN_DIR``: the trained policies, without exploration, on any env with their spaces."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from interplay.config.schema import Config, ConfigError
from interplay.envs.batch import SEED_LIMIT
from interplay.envs.registry import native_env_class
from interplay.errors import UserError
from interplay.experiment.build import env_maker, make_vec_env
from interplay.experiment.loop import Experiment, build_eval_runner, derived_seed
from interplay.experiment.resume_check import check_loadable, check_spaces, open_run
from interplay.experiment.trust import require_trust
from interplay.experiment.versus import play_versus, print_versus
from interplay.loggers.rows import return_totals
from interplay.loggers.video import write_video
from interplay.run.runner import Runner


def evaluate(run_dir: str | Path, *, checkpoint: str | Path | None = None, episodes: int = 20,
             env_id: str | None = None, overrides: Sequence[str] = (), render: str | Path | None = None,
             seed: int | None = None, out: str | Path | None = None, vs: str | None = None,
             console: Console | None = None, trust: bool = True) -> dict[str, Any]:
    """Score the run's policies over ``episodes`` episodes; writes and returns ``eval.json``.

    With ``vs`` (``random``, ``module:function``, ``snapshot_<env steps>`` of this run's league,
    or another run, checkpoint or snapshot file) the trained side plays a two-player game
    against that opponent, half the games on each seat, and the report gives win, draw and
    loss rates (see :mod:`interplay.experiment.versus`). ``trust=False`` refuses a folder whose
    config names modules other than installed env packages; the CLI asks for ``--trust``.
    """
    run_dir = Path(run_dir)
    if episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {episodes}")
    if seed is not None and not 0 <= seed < SEED_LIMIT:
        raise ConfigError(f"--seed must be 0 to {SEED_LIMIT - 1}, got {seed}")
    cfg, state, path = open_run(run_dir, ["log.console=false", *overrides], checkpoint)
    require_trust(run_dir, cfg.model_dump(), list(overrides), trust, "eval")
    dest = Path(out) if out else run_dir / "eval.json"
    failed: Exception | None = None
    exp = Experiment(cfg, run_dir)
    try:
        check_loadable(state, exp, f"checkpoint {path}")  # the algorithm and networks it was made by
        check_spaces(state["spaces"], exp.specs, what="the run's own env")
        exp.algo.load_state_dict(state["algo"])
        target = env_id or cfg.env.id
        if vs is not None:
            report = {"phase": "eval", "env": str(target), "checkpoint": str(path)}
            report.update(play_versus(cfg, exp.env.agents, exp.specs, exp.eval_actors, vs, episodes,
                                      cfg.train.seed if seed is None else seed, target,
                                      home=run_dir))
        else:
            report = _score(cfg, exp, episodes, target, path, seed)
        _write_json(dest, report)  # the scores stay, whatever becomes of the picture
        if render is not None:
            try:
                report["render"] = str(render_gif(cfg, exp, target, Path(render)))
            except Exception as err:  # noqa: BLE001 - any failure of the env's drawing is named
                failed = err
                report["render_error"] = f"{type(err).__name__}: {err}"
            _write_json(dest, report)
    finally:
        exp.close()
    if vs is not None:
        print_versus(report, console or Console())
    else:
        print_table(report, exp, console or Console())
    if failed is not None:
        raise RenderError(
            f"--render {render}: {report['render_error']}; the scores were written to {dest}"
        ) from failed
    return report


# What eval.json holds besides the episodes' figures (Window.metric_docs), for the glossary.
EVAL_DOCS = {
    "phase": "`eval`",
    "env": "the env the episodes ran on (`--env`, or the run's `env.id`)",
    "checkpoint": "the checkpoint folder the policies were loaded from",
    "env_steps": "env steps the eval took",
    "agent_steps": "agent transitions the eval took",
    "episodes": "episodes (games) played",
    "render": "with `--render`: the GIF written",
    "render_error": "with `--render`: why the env could not be drawn (the scores stand)",
}


class RenderError(UserError, RuntimeError):
    """The env could not be drawn; the scores were written all the same."""


def _write_json(dest: Path, report: dict[str, Any]) -> None:
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, dest)


def _score(cfg: Config, exp: Experiment, episodes: int, target: Any, path: Path,
           seed: int | None) -> dict[str, Any]:
    runner = build_eval_runner(cfg, exp, min(cfg.env.num_envs, episodes), target)
    try:
        runner.window.limit = episodes
        runner.reset(derived_seed(cfg.train.seed if seed is None else seed, "eval"))
        while len(runner.window) < episodes:
            runner.step(explore=False)
        report: dict[str, Any] = {
            "phase": "eval", "env": str(target), "checkpoint": str(path),
            "env_steps": runner.env_steps, "agent_steps": runner.agent_steps,
            "episodes": len(runner.window),
        }
        report.update(runner.window.summary())
    finally:
        runner.env.close()
    return report


def print_table(report: dict[str, Any], exp: Experiment, console: Console) -> None:
    table = Table(title=f"eval on {report['env']} over {report['episodes']} episodes")
    table.add_column("who")
    table.add_column("mean return", justify="right")
    for pid in exp.specs:
        table.add_row(f"policy {pid}", _fmt(report.get(f"policy_return_mean/{pid}")))
    for agent in exp.env.agents:
        table.add_row(f"agent {agent}", _fmt(report.get(f"agent_return_mean/{agent}")))
    for who, value in return_totals(report):
        table.add_row(who, _fmt(value))
    console.print(table)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_gif(cfg: Config, exp: Experiment, env_id: Any, dest: Path, episodes: int = 1) -> Path:
    """Play ``episodes`` greedy episodes on one in-process copy and write them as a GIF (or
    an MP4, for a ``dest`` that ends so)."""
    frames, durations = record_episodes(cfg, exp, env_id, episodes)
    return write_video(frames, durations, dest)


def record_episodes(cfg: Config, exp: Any, env_id: Any, episodes: int = 1,
                    seed: int | None = None) -> tuple[np.ndarray, list[float]]:
    """The frames ``[T, H, W, 3]`` of ``episodes`` greedy episodes of ``exp``'s policies on one
    in-process copy, and how long each is shown (ms).

    A built-in batched env draws itself (``render_rgb``); any other is built with
    ``render_mode="rgb_array"``, in this process even when the run steps its copies in
    workers or on Ray. Each episode's last frame is drawn before the copy resets and held for
    a second.
    """
    sync = {"vectorization": "sync"}
    if native_env_class(env_id) is not None:
        render_cfg = cfg.model_copy(update={"env": cfg.env.model_copy(update=sync)})
        env, copies = make_vec_env(render_cfg, num_envs=1, env_id=env_id, keep_state=False)
        frames = env.record_frames(0)  # type: ignore[attr-defined]  # a NativeEnv
    else:
        make = env_maker(env_id, cfg, render_mode="rgb_array")
        frames = []
        render_cfg = cfg.model_copy(update={"env": cfg.env.model_copy(update={**sync, "kwargs": {}})})
        env, copies = make_vec_env(render_cfg, num_envs=1,
                                   env_id=lambda: FrameRecorder(make(), frames), keep_state=False)
    try:
        # the policies themselves, as test phases play them (not a league's mix of members)
        runner = Runner(env, exp.specs, exp.eval_actors, set(), None, copies)
        runner.reset(derived_seed(cfg.train.seed, "render") if seed is None else seed)
        while runner.episodes < episodes:
            runner.step(explore=False)
    finally:
        env.close()
    while frames and frames[-1][0] == "start":  # the episode after the last one
        frames.pop()
    kept = [(i, f) for i, (_, f) in enumerate(frames) if f is not None]
    if not kept:
        raise ConfigError(f"env {env_id!r} returned no frames from render() with render_mode='rgb_array'")
    # A frame followed by an episode's start (or by nothing) is that episode's last: hold it.
    ends = {i for i in range(len(frames)) if i + 1 == len(frames) or frames[i + 1][0] == "start"}
    durations = [float(END_FRAME_MS if i in ends else FRAME_MS) for i, _ in kept]
    return np.stack([np.asarray(f) for _, f in kept]), durations


FRAME_MS = 100
END_FRAME_MS = 1000


class FrameRecorder:
    """A PettingZoo env that keeps a frame after each ``reset`` (``"start"``) and ``step``.

    Frames are drawn before the vector env resets a finished copy, so each episode's final
    state is among them. Everything else goes to the env itself.
    """

    def __init__(self, env: Any, frames: list[tuple[str, Any]]):
        self.env = env
        self.frames = frames

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet (a copy being unpickled): no recursion
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        out = self.env.reset(*args, **kwargs)
        self.frames.append(("start", self.env.render()))
        return out

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        self.frames.append(("step", self.env.render()))
        return out

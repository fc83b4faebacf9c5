"""``interplay eval RUN_DIR``: the trained policies, without exploration, on any env with their spaces."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from interplay.config.schema import Config, ConfigError
from interplay.envs.batch import SEED_LIMIT
from interplay.envs.registry import native_env_class
from interplay.experiment.loop import (
    Experiment,
    build_eval_runner,
    check_spaces,
    derived_seed,
    open_run,
)
from interplay.experiment.resume_check import check_fits
from interplay.experiment.versus import play_versus, print_versus


def evaluate(run_dir: str | Path, *, checkpoint: str | Path | None = None, episodes: int = 20,
             env_id: str | None = None, overrides: list[str] = (), render: str | Path | None = None,
             seed: int | None = None, out: str | Path | None = None, vs: str | None = None,
             console: Console | None = None) -> dict[str, Any]:
    """Score the run's policies over ``episodes`` episodes; writes and returns ``eval.json``.

    With ``vs`` (``random`` or ``module:function``) the trained side plays a two-player game
    against that opponent, half the games on each seat, and the report gives win, draw and
    loss rates (see :mod:`interplay.experiment.versus`).
    """
    run_dir = Path(run_dir)
    if episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {episodes}")
    if seed is not None and not 0 <= seed < SEED_LIMIT:
        raise ConfigError(f"--seed must be 0 to {SEED_LIMIT - 1}, got {seed}")
    cfg, state, path = open_run(run_dir, ["log.console=false", *overrides], checkpoint)
    exp = Experiment(cfg, run_dir)
    try:
        check_fits(state, exp, f"checkpoint {path}")  # the algorithm and networks it was made by
        check_spaces(state["spaces"], exp.specs, what="the run's own env")
        exp.algo.load_state_dict(state["algo"])
        target = env_id or cfg.env.id
        if vs is not None:
            report = {"phase": "eval", "env": str(target), "checkpoint": str(path)}
            report.update(play_versus(cfg, exp.env.agents, exp.specs, exp.actors, vs, episodes,
                                      cfg.train.seed if seed is None else seed, target))
        else:
            report = _score(cfg, exp, episodes, target, path, seed)
        if render is not None:
            report["render"] = str(render_gif(cfg, exp, target, Path(render)))
    finally:
        exp.close()
    dest = Path(out) if out else run_dir / "eval.json"
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, dest)
    if vs is not None:
        print_versus(report, console or Console())
    else:
        print_table(report, exp, console or Console())
    return report


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
    table.add_row("episode (all agents)", _fmt(report.get("episode_return_mean")))
    console.print(table)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_gif(cfg: Config, exp: Experiment, env_id: Any, dest: Path, episodes: int = 1) -> Path:
    """Play ``episodes`` greedy episodes on one copy built with ``render_mode="rgb_array"``."""
    import imageio.v2 as imageio

    from interplay.experiment.build import make_vec_env
    from interplay.run.runner import Runner

    if native_env_class(env_id) is not None:
        raise ConfigError(
            f"--render needs a PettingZoo env that draws frames; {env_id!r} is a batched built-in. "
            "Add --env with the original, e.g. --env mpe2.simple_spread_v3"
        )
    kwargs = {**cfg.env.kwargs, "render_mode": "rgb_array"}
    render_cfg = cfg.model_copy(update={"env": cfg.env.model_copy(update={"kwargs": kwargs})})
    env, copies = make_vec_env(render_cfg, num_envs=1, env_id=env_id)
    frames = []
    try:
        runner = Runner(env, exp.specs, exp.actors, set(), None, copies)
        runner.reset(derived_seed(cfg.train.seed, "render"))
        frames.append(env.render(0))
        while runner.episodes < episodes:
            runner.step(explore=False)
            if runner.episodes < episodes:
                frames.append(env.render(0))
    finally:
        env.close()
    frames = [f for f in frames if f is not None]
    if not frames:
        raise ConfigError(f"env {env_id!r} returned no frames from render() with render_mode='rgb_array'")
    dest.parent.mkdir(parents=True, exist_ok=True)
    imageio.mimsave(dest, frames, duration=0.1, loop=0)
    return dest

"""``interplay eval RUN_DIR``: the trained policies, without exploration, on any env with their spaces."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from interplay.config.schema import Config
from interplay.errors import ConfigError, UserError, WriteError
from interplay.experiment.loop import Experiment, build_eval_runner
from interplay.experiment.recording import record_episodes
from interplay.experiment.run_store.resume_check import check_loadable, check_spaces, open_run
from interplay.experiment.run_store.run_folder import refuse_links
from interplay.experiment.run_store.trust import require_trust_in
from interplay.experiment.versus import check_opponent, play_versus, print_versus
from interplay.loggers.console import return_totals
from interplay.loggers.video import write_video
from interplay.seeding import SEED_LIMIT, derived_seed


def evaluate(run_dir: str | Path, *, checkpoint: str | Path | None = None, episodes: int = 20,
             env_id: str | None = None, overrides: Sequence[str] = (), render: str | Path | None = None,
             seed: int | None = None, out: str | Path | None = None, vs: str | None = None,
             console: Console | None = None, trust: bool = True, opening: int = 0
             ) -> dict[str, Any]:
    """Score the run's policies over ``episodes`` episodes; writes and returns ``eval.json``.

    With ``vs`` (``random``, ``module:function``, ``snapshot_<env steps>`` of this run's league,
    or another run, checkpoint or snapshot file) the trained side plays a two-player game
    against that opponent, half the games on each seat, and the report gives win, draw and
    loss rates (see :mod:`interplay.experiment.versus`); ``opening`` draws the first moves of
    each game at random, so that deterministic players do not replay one game. ``trust=False`` refuses a folder whose
    config names modules other than installed env packages; the CLI asks for ``--trust``.
    """
    run_dir = Path(run_dir)
    if episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, got {episodes}")
    if seed is not None and not 0 <= seed < SEED_LIMIT:
        raise ConfigError(f"--seed must be 0 to {SEED_LIMIT - 1}, got {seed}")
    if opening and vs is None:
        raise ConfigError("--opening is for head-to-head games: give --vs OPPONENT too")
    if opening < 0:
        raise ConfigError(f"--opening must be 0 or more moves, got {opening}")
    if out is None:
        refuse_links(run_dir)  # eval.json is written into it
    if vs is not None:
        check_opponent(vs)
        require_trust_in("--vs", vs, trust, "eval")
    cfg, state, path = open_run(run_dir, ["log.console=false", *overrides], checkpoint, trust,
                                "eval")
    dest = Path(out) if out else run_dir / "eval.json"
    check_destination(dest, "--out")
    if render is not None:
        check_destination(Path(render), "--render")
    failed: Exception | None = None
    exp = Experiment(cfg, run_dir, attach=False)  # the league's members play no part here
    try:
        check_loadable(state, exp, f"checkpoint {path}")  # the algorithm and networks it was made by
        check_spaces(state["spaces"], exp.specs, what="the run's own env")
        exp.algo.load_state_dict(state["algo"])
        target = env_id or cfg.env.id
        if vs is not None:
            report = {"phase": "eval", "env": str(target), "checkpoint": str(path)}
            report.update(play_versus(cfg, exp.env.agents, exp.specs, exp.eval_actors, vs, episodes,
                                      cfg.train.seed if seed is None else seed, target,
                                      home=run_dir, opening=opening))
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


def check_destination(dest: Path, option: str) -> None:
    """Refuse, before the work whose result it would hold, a file that cannot be written there."""
    if dest.is_dir():
        raise ConfigError(f"{option} {dest}: a folder; give the name of a file inside it")
    folder = dest.parent
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        raise ConfigError(f"{option} {dest}: the folder {folder} {what}; make it first or "
                          "write elsewhere")


def _write_json(dest: Path, report: dict[str, Any]) -> None:
    tmp = dest.with_name(f".{dest.name}.tmp")
    try:
        tmp.write_text(json.dumps(report, indent=2) + "\n")
        os.replace(tmp, dest)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise WriteError.of(dest, err, "the scores were not saved") from err


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



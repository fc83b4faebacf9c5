"""``interplay league RUN_DIR``: the pool's table at the last report, and every member's rating
over training drawn into ``ratings.png``, read from the run's ``league.jsonl``."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from interplay.experiment.run_store.run_folder import refuse_links
from interplay.population.league.pool import LEARNER, LeagueError, LeagueWarning


def league_report(run_dir: str | Path, console: Any = None) -> list[dict[str, Any]]:
    """``interplay league RUN_DIR``: the pool's table at the last report, and ``ratings.png``
    (every member's rating over training) in the run folder."""
    from rich.console import Console
    from rich.table import Table

    path = Path(run_dir) / "league.jsonl"
    if not path.is_file():
        raise LeagueError(f"{run_dir}: no league.jsonl; was the run trained with "
                          "league.snapshot_every?")
    lines = read_league_lines(path)
    if not lines:
        raise LeagueError(f"{path} has no readable line: the run has not reported yet")
    last = lines[-1]
    split = any(m.get("by_side") for m in last["members"])  # older lines have no by_side
    sides = ("; score by side: its wins and half its draws on each side, first side first"
             if split else "")
    table = Table(title=f"league at {last['env_steps']:,} env steps (win/draw/loss: the "
                        f"learner's games against each member{sides})")
    cols = ["member", "kind", "env steps at snapshot", "rating", "games", "win", "draw", "loss"]
    for col in cols + ["score by side"] * split:
        table.add_column(col, justify="left" if col in ("member", "kind") else "right",
                         overflow="fold" if col == "member" else "ellipsis")
    rows = [{"member": LEARNER, "kind": "learner", "env_steps": last["env_steps"],
             "rating": last["ratings"][LEARNER], "games": None, "wdl": None}]
    for m in last["members"]:
        rows.append({"member": m["name"], "kind": m["kind"], "env_steps": m["env_steps"],
                     "rating": last["ratings"][m["name"]], "games": m["games"],
                     "wdl": m["learner_win_draw_loss"], "by_side": m.get("by_side") or []})
    for r in sorted(rows, key=lambda r: -r["rating"]):
        wdl = r["wdl"] or ["", "", ""]
        by_side = [" / ".join(_score(s) for s in r.get("by_side") or [])] * split
        table.add_row(_short(r["member"], r["kind"]), r["kind"], f"{r['env_steps']:,}", f"{r['rating']:.1f}",
                      "" if r["games"] is None else str(r["games"]), *map(str, wdl), *by_side)
    against_self = last.get("games_against_self")
    if isinstance(against_self, int) and not isinstance(against_self, bool):
        table.caption = (f"and {against_self:,} games of the learner against itself "
                         "(league.against_self), not rated")
    (console or Console()).print(table)
    refuse_links(Path(run_dir))  # ratings.png is written into it
    _plot(lines, Path(run_dir) / "ratings.png")
    return rows


def read_league_lines(path: Path) -> list[dict[str, Any]]:
    """The lines of ``league.jsonl``; a damaged one (a crash cut it, say) is skipped and named."""
    out = []
    for number, text in enumerate(path.read_bytes().splitlines(), 1):
        if not text.strip():
            continue
        try:
            out.append(_checked(json.loads(text)))
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            warnings.warn(f"{path}: line {number} is damaged and skipped ({type(err).__name__}: "
                          f"{err})", LeagueWarning, stacklevel=2)
    return out


def _checked(line: Any) -> dict[str, Any]:
    """``line`` if it holds what the table and the picture read (TypeError, KeyError if not)."""
    ratings = line["ratings"]
    _numbers(line["env_steps"], ratings[LEARNER], *ratings.values())
    for m in line["members"]:
        _numbers(ratings[m["name"]], m["env_steps"], m["games"], *m["learner_win_draw_loss"])
        by_side = m.get("by_side", [])
        if (not isinstance(m["kind"], str) or len(m["learner_win_draw_loss"]) != 3
                or not isinstance(by_side, list)
                or any(not isinstance(s, list) or len(s) != 3 for s in by_side)):
            raise TypeError(f"member {m['name']!r} is not as league.jsonl writes it")
        for side in by_side:
            _numbers(*side)
    return line


def _numbers(*values: Any) -> None:
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{value!r} is not a number")


def _score(wdl: list[int]) -> str:
    """The learner's score (wins and half the draws) over ``wdl``'s games; - for none."""
    games = sum(wdl)
    return f"{(wdl[0] + 0.5 * wdl[1]) / games:.2f}" if games else "-"


def _short(name: str, kind: str) -> str:
    """A scripted member's name without its package path (``connect_four:one_ply``)."""
    if kind != "scripted":
        return name
    module, _, fn = name.partition(":")
    return f"{module.rpartition('.')[2]}:{fn}"


def _plot(lines: list[dict[str, Any]], dest: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = list(dict.fromkeys(k for line in lines for k in line["ratings"]))
    for name in names:
        xs = [line["env_steps"] for line in lines if name in line["ratings"]]
        ys = [line["ratings"][name] for line in lines if name in line["ratings"]]
        ax.plot(xs, ys, label=name, linewidth=2.5 if name == LEARNER else 1.0)
    ax.set_xlabel("env steps")
    ax.set_ylabel("Elo rating")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(dest, dpi=100)
    plt.close(fig)

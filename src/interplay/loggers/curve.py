"""The learning-curve picture: returns (and win rates) against env steps, from ``metrics.jsonl``."""

from __future__ import annotations

import json
import math
import os
import re
import secrets
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

_POLICY = "policy_return_mean/"
_AGENT = "agent_return_mean/"
_RATE = re.compile(r"(win|draw|loss)_?rate", re.IGNORECASE)
MAX_AGENT_LINES = 16  # more agents than this get no panel of their own

Series = dict[str, dict[str, tuple[list[int], list[float]]]]  # phase -> name -> (xs, ys)


def plot_curve(metrics_path: Path, out_png: Path) -> None:
    """Draw the curves of :func:`curve_figure` for a ``metrics.jsonl`` into ``out_png``."""
    metrics_path, out_png = Path(metrics_path), Path(out_png)
    rows = read_metrics(metrics_path)
    _save_atomically(curve_figure(rows, metrics_path.resolve().parent.name), out_png)


def curve_figure(rows: list[dict[str, Any]], title: str = "") -> Figure:
    """Mean return per policy; per agent (seat) when a policy plays several agents, as in
    self-play, where a zero-sum game leaves the policy's own return flat; win, draw and loss
    rates when the rows have any (``*win_rate*`` and the like: a callback's metric, say); and
    the episode's return summed over agents. Train lines are solid, test lines dashed.
    """
    policies = _series(rows, lambda k: k.removeprefix(_POLICY) if k.startswith(_POLICY) else None)
    agents = _series(rows, lambda k: k.removeprefix(_AGENT) if k.startswith(_AGENT) else None)
    rates = _series(rows, lambda k: k if _RATE.search(k) else None)
    episodes = _series(rows, lambda k: "episode" if k == "episode_return_mean" else None)
    panels: list[tuple[str, Series, str]] = [("mean return per policy", policies, "return")]
    if len(_names(policies)) < len(_names(agents)) <= MAX_AGENT_LINES:
        panels.append(("mean return per agent (seat)", agents, "return"))
    if rates:
        panels.append(("win, draw and loss rates", rates, "fraction of episodes"))
    panels.append(("mean episode return (sum over agents)", episodes, "return"))

    # A bare Figure on the Agg canvas: no pyplot state, no display needed.
    fig = Figure(figsize=(8, 1.2 + 2.9 * len(panels)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    fig.suptitle(title)
    for ax, (name, series, ylabel) in zip(axes, panels, strict=True):
        names = _names(series)
        colours = {n: f"C{i}" for i, n in enumerate(names)}
        for phase, by_name in sorted(series.items(), key=lambda kv: kv[0] != "train"):
            for n, (xs, ys) in sorted(by_name.items()):
                label = phase if names == ["episode"] else f"{n} ({phase})"
                _line(ax, phase, xs, ys, colours[n], label)
        ax.set(title=name, ylabel=ylabel)
        if series is rates:
            ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="small")
        else:
            ax.text(0.5, 0.5, "no returns reported yet", transform=ax.transAxes,
                    ha="center", va="center", color="grey")
    axes[-1].set(xlabel="env steps")
    return fig


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The report rows of a ``metrics.jsonl``, each bad line named by file and line number."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
            if not isinstance(row, dict) or "env_steps" not in row:
                raise ValueError(f"{path}:{lineno}: expected a JSON object with 'env_steps'")
            rows.append(row)
    return rows


def _series(rows: list[dict[str, Any]], name_of: Callable[[str], str | None]) -> Series:
    """The numeric values of every key that ``name_of`` names, by phase and name."""
    out: Series = defaultdict(lambda: defaultdict(lambda: ([], [])))
    for row in rows:
        phase, step = row.get("phase", "train"), row["env_steps"]
        for key, value in row.items():
            name = name_of(key)
            if name is None or not _is_number(value):
                continue
            xs, ys = out[phase][name]
            xs.append(step)
            ys.append(value)
    return out


def _names(series: Series) -> list[str]:
    return sorted({n for by_name in series.values() for n in by_name})


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _line(ax: Any, phase: str, xs: list, ys: list, colour: str, label: str) -> None:
    if phase == "train":
        ax.plot(xs, ys, "-", color=colour, label=label, marker="o" if len(xs) == 1 else None)
    else:
        ax.plot(xs, ys, "--", color=colour, label=label, marker="o", markersize=4)


def _save_atomically(fig: Figure, out_png: Path) -> None:
    out_png.parent.mkdir(parents=True, exist_ok=True)
    # Not mkstemp: its 0600 mode would outlive the rename; "x" keeps the umask's mode.
    tmp = out_png.with_name(f".{out_png.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "xb") as fh:
            fig.savefig(fh, format="png", dpi=100)
        os.replace(tmp, out_png)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise

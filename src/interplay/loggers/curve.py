"""The learning-curve picture: mean return against env steps, from ``metrics.jsonl``."""

from __future__ import annotations

import json
import math
import os
import secrets
from collections import defaultdict
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

_POLICY = "policy_return_mean/"

Series = dict[str, dict[str, tuple[list[int], list[float]]]]


def plot_curve(metrics_path: Path, out_png: Path) -> None:
    """Draw each policy's and the whole episode's mean return, train solid and test dashed."""
    metrics_path, out_png = Path(metrics_path), Path(out_png)
    rows = read_metrics(metrics_path)
    policies, episodes = _series(rows)

    # A bare Figure on the Agg canvas: no pyplot state, no display needed.
    fig = Figure(figsize=(8, 7), layout="constrained")
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True)
    fig.suptitle(metrics_path.resolve().parent.name)
    colours = {pid: f"C{i}" for i, pid in enumerate(sorted({p for s in policies.values()
                                                             for p in s}))}
    for phase, by_policy in sorted(policies.items(), key=lambda kv: kv[0] != "train"):
        for pid, (xs, ys) in sorted(by_policy.items()):
            _line(top, phase, xs, ys, colours[pid], f"{pid} ({phase})")
    for phase, (xs, ys) in sorted(episodes.items(), key=lambda kv: kv[0] != "train"):
        _line(bottom, phase, xs, ys, "C0" if phase == "train" else "C1", phase)

    top.set(title="mean return per policy", ylabel="return")
    bottom.set(title="mean episode return (sum over agents)", xlabel="env steps",
               ylabel="return")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="small")
        else:
            ax.text(0.5, 0.5, "no returns reported yet", transform=ax.transAxes,
                    ha="center", va="center", color="grey")
    _save_atomically(fig, out_png)


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


def _series(rows: list[dict[str, Any]]) -> tuple[Series, dict[str, tuple[list, list]]]:
    policies: Series = defaultdict(lambda: defaultdict(lambda: ([], [])))
    episodes: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for row in rows:
        phase, step = row.get("phase", "train"), row["env_steps"]
        for key, value in row.items():
            if not _is_number(value):
                continue
            if key.startswith(_POLICY):
                target = policies[phase][key.removeprefix(_POLICY)]
            elif key == "episode_return_mean":
                target = episodes[phase]
            else:
                continue
            target[0].append(step)
            target[1].append(value)
    return policies, episodes


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

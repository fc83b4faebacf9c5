"""The console: a progress bar while training, each report's returns, a summary at the end."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

_AGENT = "agent_return_mean/"


def mean_per_agent(row: dict[str, Any]) -> float | None:
    """The mean over agents of each agent's mean return in ``row`` (None if none finished)."""
    values = [v for k, v in row.items() if k.startswith(_AGENT) and v is not None]
    return sum(values) / len(values) if values else None


class ConsoleLogger:
    """A live progress bar with env steps, env-steps/s, ETA and the latest returns.

    Returns are shown both ways, labelled: an episode's return summed over its agents (what
    ``episode_return_mean`` holds) and the mean per agent (as the summary table lists them).
    """

    def __init__(self, total: int, enabled: bool = True, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]} steps/s"), TimeElapsedColumn(), TextColumn("eta"),
            TimeRemainingColumn(), TextColumn("{task.fields[latest]}"),
            console=self.console, disable=not enabled, transient=False,
        )
        self.task = self.progress.add_task(
            "train", total=total if total > 0 else None, rate="-", latest="")
        self.latest: dict[str, str] = {}
        if enabled:
            self.progress.start()

    def advance(self, env_steps: int) -> None:
        self.progress.update(self.task, completed=env_steps)

    def report(self, row: dict[str, Any]) -> None:
        ret, per_agent = row.get("episode_return_mean"), mean_per_agent(row)
        if ret is not None:
            text = f"{row['phase']} return {ret:.2f} (sum over agents)"
            if per_agent is not None:
                text += f", {per_agent:.2f} mean per agent"
            self.latest[row["phase"]] = text
        fields: dict[str, Any] = {"latest": "  ".join(self.latest.values())}
        if row["phase"] == "train":  # a test row's rate is the eval env's, not training's
            fields["rate"] = f"{row.get('env_steps_per_s', 0):,.0f}"
        self.progress.update(self.task, completed=row["env_steps"], **fields)

    def summary(self, row: dict[str, Any], policies: list[str], agents: list[str]) -> None:
        self.close()
        if not self.enabled:
            return
        table = Table(title="returns in the last report")
        table.add_column("who")
        table.add_column("mean return", justify="right")
        for pid in policies:
            v = row.get(f"policy_return_mean/{pid}")
            table.add_row(f"policy {pid}", "-" if v is None else f"{v:.3f}")
        for a in agents:
            v = row.get(f"agent_return_mean/{a}")
            table.add_row(f"agent {a}", "-" if v is None else f"{v:.3f}")
        for who, v in return_totals(row):
            table.add_row(who, "-" if v is None else f"{v:.3f}")
        self.console.print(table)

    def close(self) -> None:
        if self.enabled and self.progress.live.is_started:
            self.progress.stop()


def return_totals(row: dict[str, Any]) -> list[tuple[str, float | None]]:
    """The two whole-episode figures, labelled as the console shows them."""
    return [("episode return (sum over agents)", row.get("episode_return_mean")),
            ("mean per agent", mean_per_agent(row))]

"""What updates report, as a train row shows it: the mean over every update since the last row."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any


class UpdateMeans:
    """Sums and counts of each learner metric (loss, entropy, KL, Q-values...) per report.

    Each metric is averaged over the updates that reported it since the last report, except
    ``gauges`` (the algorithm's state, such as a buffer's size: see ``Algorithm.gauges``),
    which give their value at the last of those updates. Once a metric has been reported,
    every later report carries it: ``None`` (``null`` in ``metrics.jsonl``) when no update in
    its window reported it, never a stale value.
    """

    def __init__(self, gauges: Collection[str] = ()) -> None:
        self.gauges = frozenset(gauges)
        self.names: list[str] = []  # every metric seen, in first-seen order
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, metrics: dict[str, Any]) -> None:
        """Take in what one update returned."""
        for name, value in metrics.items():
            if name not in self.counts:
                if name not in self.names:
                    self.names.append(name)
                self.sums[name], self.counts[name] = 0.0, 0
            if name in self.gauges or name.partition("/")[0] in self.gauges:
                self.sums[name], self.counts[name] = float(value), 1
            else:
                self.sums[name] += float(value)
                self.counts[name] += 1

    def take(self) -> dict[str, float | None]:
        """The means since the last call (``None`` for metrics no update gave), and start anew."""
        out = {name: self.sums[name] / self.counts[name] if name in self.counts else None
               for name in self.names}
        self.sums, self.counts = {}, {}
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"names": list(self.names), "sums": dict(self.sums), "counts": dict(self.counts)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "names" not in state:  # an older checkpoint kept the last update's metrics only
            state = {"names": list(state), "sums": {}, "counts": {}}
        self.names = list(state["names"])
        self.sums, self.counts = dict(state["sums"]), dict(state["counts"])

"""Rollout storage for on-policy learners: every transition closed since the last update.

Rows stay in the order they were closed, per policy; each row keeps its copy and slot (its
stream) and the runner step that closed it, so returns and joint inputs are worked out from
that identity, never from the values in the rows.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from interplay.run.transitions import Transitions, concat


class RolloutStorage:
    saved = True  # an on-policy update needs the whole rollout: resuming without it is not exact

    def __init__(self, pids: list[str]):
        self.parts: dict[str, list[Transitions]] = {pid: [] for pid in pids}
        self.steps = 0  # steps of the copies since the last update

    def add(self, pid: str, batch: Transitions) -> None:
        if pid in self.parts and len(batch):
            self.parts[pid].append(batch)

    def end_step(self, env_steps: int) -> None:
        self.steps += 1

    def batch(self, pid: str) -> Transitions | None:
        """Everything ``pid`` closed in this rollout, in order; None if nothing."""
        parts = self.parts[pid]
        return concat(parts) if parts else None

    def clear(self) -> None:
        """The rollout was learned from: start the next one."""
        self.parts = {pid: [] for pid in self.parts}
        self.steps = 0

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps,
                "parts": {pid: [dataclasses.asdict(b) for b in parts]
                          for pid, parts in self.parts.items()}}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        self.clear()
        if state is None:
            return
        self.steps = state["steps"]
        for pid, parts in state["parts"].items():
            self.parts[pid] = [Transitions(**b) for b in parts]

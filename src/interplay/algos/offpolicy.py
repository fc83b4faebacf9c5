"""What the off-policy algorithms share: when a learning round is due, how many gradient steps
it takes, target networks that follow their online ones, and batches as tensors."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from interplay.algos.base import LearnSchedule


class Replay(Protocol):
    """A replay storage, as the schedule asks it."""

    def holds(self, n: int) -> bool:
        """Whether it holds a batch of ``n`` rows to learn from."""
        ...


class ReplaySchedule:
    """Learning rounds every ``train_every`` env steps from ``learning_starts`` on; an update
    takes ``gradient_steps`` per round the loop's last step spanned, so the number of copies
    does not change how much is learned per env step. Mixed into an algorithm whose settings
    name those three and ``batch_size``."""

    settings: Any
    schedule: LearnSchedule
    _rounds: int

    def start_schedule(self) -> None:
        s = self.settings
        self.schedule = LearnSchedule(s.learning_starts, s.train_every)
        self._rounds = 0  # learning rounds the next update takes

    def ready(self, storage: Replay, env_steps: int) -> bool:
        """True when a learning round is due (and the storage holds a batch)."""
        self.schedule.advance(env_steps)
        if not self.schedule.due():
            return False
        learnable = storage.holds(self.settings.batch_size)
        self._rounds = self.schedule.take()  # rounds with nothing to learn from yet pass
        return learnable

    def take_steps(self) -> int:
        """The gradient steps the update now due takes."""
        steps = self.settings.gradient_steps * max(1, self._rounds)
        self._rounds = 0
        return steps


def follow(target: nn.Module, online: nn.Module, tau: float) -> None:
    """Move every parameter of ``target`` the fraction ``tau`` of the way to ``online``'s
    (a copy when ``tau`` is 1)."""
    with torch.no_grad():
        for t, o in zip(target.parameters(), online.parameters(), strict=True):
            if tau == 1.0:
                t.copy_(o)
            else:
                t.lerp_(o, tau)


def tensor(x: np.ndarray, device: str) -> torch.Tensor:
    """``x`` as a tensor on ``device``. The runner hands read-only views of its buffers
    (masks, say); torch wants memory it may write to, so those alone are copied."""
    return torch.from_numpy(np.require(x, requirements=("C", "W"))).to(device)

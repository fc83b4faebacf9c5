"""What the off-policy algorithms share: the settings of learning from replay, when a learning
round is due and how many gradient steps it takes, target networks that follow their online
ones, batches as tensors, and the check that a loss is finite.

Every step count is in env steps, all copies together, as everywhere in interplay: with
``env.num_envs`` copies one step of the loop is that many env steps, and takes as many learning
rounds as ``train_every`` intervals it spans.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch
from pydantic import Field
from pydantic.fields import FieldInfo
from torch import nn

from interplay.algos.base import Algorithm, LearnSchedule, tensor
from interplay.config.algo import AlgoSettings, PrioritySettings
from interplay.config.limits import MAX_COUNT, MAX_SIZE, MAX_STEPS
from interplay.errors import NonFiniteError
from interplay.run.mapping import PolicySpec


class ReplaySettings(AlgoSettings):
    """The settings of every learner from a replay buffer; each algorithm keeps its own
    defaults (:func:`default`)."""

    gamma: float = Field(0.99, ge=0, le=1)
    """Discount per transition (per agent turn in turn-based envs)."""
    batch_size: int = Field(64, ge=1, le=MAX_SIZE)
    """Rows per gradient step: an agent's transitions, or joint rows (one per env copy and
    step) for learners that see every agent at once."""
    buffer_size: int = Field(100_000, ge=1, le=MAX_SIZE)
    """Rows the replay buffer holds (of each policy, for independent learners); the oldest
    go first."""
    save_buffer: bool = True
    """Keep the replay buffers in checkpoints, so that a resumed run continues exactly."""
    learning_starts: int = Field(1_000, ge=0, le=MAX_STEPS)
    """Env steps (all copies together) before the first learning round."""
    train_every: int = Field(1, ge=1, le=MAX_STEPS)
    """Env steps between two learning rounds; when the copies take more than this in one
    step of the loop, that step takes as many rounds, so learning keeps pace with the data."""
    gradient_steps: int = Field(1, ge=1, le=MAX_COUNT)
    """Gradient steps per learning round, each on every learning policy."""
    tau: float = Field(1.0, gt=0, le=1)
    """Each target update moves the target networks this far towards the online ones
    (1 = copy)."""


def default(name: str, value: Any, doc: str | None = None) -> Any:
    """:class:`ReplaySettings`' field ``name`` with an algorithm's own default (and, where
    its meaning there needs saying, its own doc); bounds stay as declared once."""
    field = ReplaySettings.model_fields[name]
    changes: dict[str, Any] = {"default": value}
    if doc is not None:
        changes["description"] = doc
    return FieldInfo.merge_field_infos(field, **changes)


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


class OffPolicy(ReplaySchedule, Algorithm):
    """An algorithm that learns from a replay storage on :class:`ReplaySchedule`'s rounds,
    counting its gradient steps in ``updates``."""

    off_policy = True
    settings: Any
    sample_rng: np.random.Generator  # draws the batches

    def __init__(self, settings: AlgoSettings, specs: dict[str, PolicySpec], device: str,
                 seed: int):
        super().__init__(settings, specs, device, seed)
        self.start_schedule()
        self.updates = 0  # gradient steps taken

    def tensor(self, x: np.ndarray) -> torch.Tensor:
        return tensor(x, self.device)

    def check_finite(self, loss: torch.Tensor, what: str, who: str, updates: int,
                     lower: str) -> None:
        """Stop, naming ``who`` learns (the policies), the loss, the env step and the gradient
        step, at a loss that is nan or infinite (``lower``: the settings that may tame it)."""
        if not torch.isfinite(loss):
            raise NonFiniteError(
                f"{who}: the {what} is {loss.item()} at env step "
                f"{self.schedule.env_steps} (gradient step {updates}); check rewards and "
                f"observations for huge values, or lower {lower}")

    def schedule_state(self) -> dict[str, Any]:
        """What every off-policy learner keeps of its progress: the schedule, its gradient
        steps, and the RNG that draws its batches."""
        return {"schedule": self.schedule.state_dict(), "updates": self.updates,
                "sample_rng": self.sample_rng.bit_generator.state}

    def load_schedule_state(self, state: dict[str, Any]) -> None:
        self.schedule.load_state_dict(state["schedule"])
        self.updates = state["updates"]
        self.sample_rng.bit_generator.state = state["sample_rng"]


def priority_of(settings: Any) -> tuple[float, float] | None:
    """Prioritised replay's ``(alpha, eps)`` where the settings ask for it, else None."""
    if isinstance(settings, PrioritySettings) and settings.prioritized:
        return settings.priority_alpha, settings.priority_eps
    return None


def follow(target: nn.Module, online: nn.Module, tau: float) -> None:
    """Move every parameter of ``target`` the fraction ``tau`` of the way to ``online``'s
    (a copy when ``tau`` is 1)."""
    with torch.no_grad():
        for t, o in zip(target.parameters(), online.parameters(), strict=True):
            if tau == 1.0:
                t.copy_(o)
            else:
                t.lerp_(o, tau)


def follow_all(pairs: list[tuple[nn.Module, nn.Module]], tau: float) -> None:
    """:func:`follow` for each ``(target, online)`` pair."""
    for target, online in pairs:
        follow(target, online, tau)

"""Parts of a run that live beside the loop (a self-play league and its exploiters), built with
the run and heard by the loop at fixed points without the loop knowing what they are.

A package above the experiment registers a builder once (:func:`register_attachment`); every
:class:`~interplay.experiment.loop.Experiment` calls each builder with its config and itself,
and what they return are runner callbacks that also keep rows out of storage, add figures to
train rows, hear of checkpoints and end with the run. A builder that acts for a policy (a
league's opponents) wraps its actor through ``Experiment.wrap_actor``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from interplay.config.schema import Config
from interplay.run.callbacks import Callbacks
from interplay.run.transitions import Transitions


class Attachment(Callbacks):
    """A runner callback that the loop also tells of its storage, reports, checkpoints and end.
    Every hook does nothing by default."""

    def kept(self, pid: str, batch: Transitions) -> Transitions:
        """The rows of ``batch`` (policy ``pid``'s, from one step) that go to storage and the
        learner; all of them by default."""
        return batch

    def report(self, env_steps: int) -> dict[str, Any]:
        """Figures for the train row at ``env_steps``, in the order they are to appear."""
        return {}

    def checkpointed(self, run_dir: Path) -> None:
        """A checkpoint was written into ``run_dir``."""

    def close(self) -> None:
        """The run ends (also when it failed)."""


Builder = Callable[[Config, Any], list[Attachment]]
"""Builds the attachments a run's config asks for, given the config and the experiment."""

_BUILDERS: list[Builder] = []


def register_attachment(builder: Builder) -> Builder:
    """Have every experiment built from now on call ``builder``; registering twice is once."""
    if builder not in _BUILDERS:
        _BUILDERS.append(builder)
    return builder


def build_attachments(cfg: Config, exp: Any) -> list[Attachment]:
    """What every registered builder attaches to ``exp``, in the order they registered."""
    return [part for builder in _BUILDERS for part in builder(cfg, exp)]

"""What the training loop keeps for learners: one storage object per run, owned by the loop.

An algorithm says which storage it learns from (:meth:`interplay.Algorithm.make_storage`); the
loop makes it, hands it every transition the runner closes, tells it when a step of the copies
is over, saves it in checkpoints beside the algorithm, and passes it to ``ready`` and
``update``. Kinds: :class:`~interplay.data.rollout.RolloutStorage` (on-policy: everything since
the last update), :class:`~interplay.data.replay.PolicyReplay` (a replay buffer per policy)
and :class:`~interplay.data.replay.JointReplay` (joint rows of every policy's agents).
"""

from __future__ import annotations

from typing import Any, Protocol

from interplay.run.transitions import Transitions


class Storage(Protocol):
    saved: bool  # whether checkpoints keep what it holds

    def add(self, pid: str, batch: Transitions) -> None:
        """Take the transitions of policy ``pid`` the runner closed (or released) this step."""

    def end_step(self, env_steps: int) -> None:
        """A step of the copies is over; the run has taken ``env_steps`` env steps."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Continue from :meth:`state_dict`, or start empty from None (nothing was saved)."""

"""Parts of a run that travel with the Ray env runners: a rider acts inside each runner, its
passenger stays with the learner, and they talk once per block and once per step.

A learner-side part (a league's pool) that needs work done where the env copies are stepped
offers a :class:`Passenger`. Its :meth:`Passenger.rider` is built into every runner among the
runner's callbacks (it hears the runner's episodes start and end) and installed once the
runner is built. Before each block the learner hands every runner the passenger's
:meth:`~Passenger.orders`; after each step the runner hands back what each rider has to say
(:meth:`Rider.after_step`), and the learner gives it to the passenger as the loop takes that
step (:meth:`~Passenger.arrived`), so what the rider did is heard at the step it did it.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from interplay.run.callbacks import Callbacks


class Rider(Callbacks):
    """The runner-side half: a runner callback, installed after the runner is built."""

    def install(self, parts: Any, index: int, restarts: int) -> None:
        """Take up the runner's parts (``RunnerParts``) as runner ``index``, after
        ``restarts`` replacements of it."""

    def begin(self, orders: Any) -> None:
        """The learner's orders for the block about to be stepped."""

    def after_step(self) -> Any:
        """What this step did that the learner is to hear (None: nothing)."""
        return None


@runtime_checkable
class Passenger(Protocol):
    """The learner-side half."""

    def rider(self) -> Rider:
        """A fresh rider, to be pickled into every runner."""
        ...

    def orders(self, runner: int, fresh: bool) -> Any:
        """What runner ``runner`` is told before its next block; ``fresh``: it was (re)built
        or reset since it was last told."""
        ...

    def arrived(self, runner: int, offset: int, said: Any) -> None:
        """What runner ``runner`` (its copies numbered from ``offset``) said after a step, as
        the loop takes that step."""
        ...

"""SIGINT and SIGTERM stop a run where it can be checkpointed, so ``resume`` continues from there.

While the loop runs, the first signal only asks it to stop: it finishes the step under way,
writes a checkpoint and raises :class:`Interrupted`. Outside the loop, or at a second signal,
the run stops at once. Either way the exception unwinds normally, so env workers, shared
memory and multiprocessing's temporary folders are cleaned up.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal; ``checkpoint`` is where it can be resumed from, if written."""

    def __init__(self, signum: int, run_dir: Path | None = None, checkpoint: Path | None = None,
                 env_steps: int | None = None):
        super().__init__(signum)
        self.signum, self.run_dir, self.checkpoint, self.env_steps = (
            signum, run_dir, checkpoint, env_steps)
        self.where = f"env step {env_steps}"
        """Where the run stopped, for the message."""
        self.saved = f"checkpoint written to {checkpoint}"
        """What was saved, and where."""
        self.command = f"interplay resume {run_dir}"
        """What continues it (a search's members are continued by ``hpo --resume``)."""

    def __str__(self) -> str:
        name = signal.Signals(self.signum).name
        if self.checkpoint is None:
            return f"stopped by {name} without writing a checkpoint"
        return f"stopped by {name} at {self.where}; {self.saved}; continue with: {self.command}"


class StopRequest:
    """Turns SIGINT and SIGTERM into :class:`Interrupted` while entered (main thread only).

    Inside :meth:`deferring`, the first signal is only recorded in ``signum`` for the loop to
    act on between steps.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self._deferring = False
        self._active = False
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
            self._active = True
        return self

    def __exit__(self, *exc: object) -> None:
        self._active = False
        for signum, handler in self._previous.items():
            if signal.getsignal(signum) == self._handle:
                signal.signal(signum, handler)
            # else a handler installed since then calls ours in turn: ours passes signals on

    @contextmanager
    def deferring(self) -> Iterator[None]:
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False

    def _handle(self, signum: int, frame: Any) -> None:
        if not self._active:
            _pass_on(self._previous[signum], signum, frame)
        elif self._deferring and self.signum is None:
            self.signum = signum
            print(f"\n{signal.Signals(signum).name}: stopping after this step to write a "
                  "checkpoint (send it again to stop at once)", file=sys.stderr, flush=True)
        else:
            raise Interrupted(signum)


def _pass_on(handler: Any, signum: int, frame: Any) -> None:
    """Do what ``handler`` (as :func:`signal.signal` returned it) would have done."""
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_IGN:
        return
    elif signum == signal.SIGINT:
        signal.default_int_handler(signum, frame)
    else:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

"""Env copies that write their steps into buffers, reset themselves, and outlive envs that raise.

:class:`EnvCopies` drives copies ``rows`` of a vector env: all of them in-process for
``SyncVecEnv``, a slice of them inside each worker of ``AsyncVecEnv``. When a copy's env raises
in ``step`` or ``reset``, the copy is rebuilt from ``make`` and reset with a fresh seed derived
from its reset seed and how often it has been rebuilt, so the failed episode is not replayed.
A step that fails abandons the episode: the copy's row carries no rewards or flags from it, is
marked ``dropped``, and already holds the new episode's observations. ``max_failures`` failures
of one copy with no finished episode between them raise :class:`EnvCrashError`: failures are
for rare faults, and an env that fails every episode (or every reset) cannot be trained on.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from interplay.envs.adapters import AECAdapter, CopyStep, EnvContractError, ParallelAdapter, adapt
from interplay.envs.spaces import ObservationError
from interplay.errors import UserError
from interplay.seeding import env_seed

if TYPE_CHECKING:
    from interplay.envs.batch import StepBuffers


class EnvCrashError(UserError, RuntimeError):
    """An env copy raised ``max_failures`` times with no episode finished in between; carries
    the env's last error."""

    def __init__(self, copy: int, phase: str, env_step: int, failures: int,
                 original: BaseException | None, traceback_text: str, env_name: str = "?"):
        self.copy = copy
        self.phase = phase
        self.env_step = env_step
        self.failures = failures
        self.original = original
        self.traceback_text = traceback_text
        self.env_name = env_name
        said = traceback_text.rstrip().splitlines()[-1:] or ["(no message)"]
        super().__init__(
            f"env copy {copy} raised in {phase} (env {env_name}, at its step {env_step}) "
            f"{failures} time(s) with no episode finished in between, the limit set by "
            f"env.max_failures; giving up, as the env cannot run. The env's error: {said[0]}\n"
            f"{traceback_text.rstrip()}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.copy, self.phase, self.env_step, self.failures, self.original,
                             self.traceback_text, self.env_name))


class EnvCopies:
    """Copies ``rows`` of a vector env, stepped one after another into a :class:`StepBuffers`.

    ``entropy`` (each copy's last reset seed) and ``rebuilds`` (how often each was rebuilt)
    carry the seed derivation over to a replacement when the copies move to a new process.
    """

    def __init__(self, make: Callable[[], Any], rows: range, max_steps: int | None,
                 max_failures: int = 3, entropy: list[int | None] | None = None,
                 rebuilds: list[int] | None = None):
        if max_failures < 1:
            raise ValueError(f"env.max_failures must be at least 1, got {max_failures}")
        self.make = make
        self.rows = rows
        self.max_steps = max_steps
        self.max_failures = max_failures
        self.copies: list[AECAdapter | ParallelAdapter] = [adapt(make(), max_steps) for _ in rows]
        self.failures = 0  # every time a copy raised
        self.failed: list[int] = []  # rows that raised, in order, until take_failed()
        n = len(rows)
        self._entropy: list[int | None] = list(entropy) if entropy is not None else [None] * n
        self._rebuilds = list(rebuilds) if rebuilds is not None else [0] * n
        self._streak = [0] * n
        self._slice = slice(rows.start, rows.stop)

    def reset(self, buf: StepBuffers, seeds: list[int | None]) -> None:
        """Reset every copy, copy ``rows[i]`` with ``seeds[i]``."""
        buf.clear_step(self._slice)
        i = 0
        try:
            for i, (e, seed) in enumerate(zip(self.rows, seeds, strict=True)):
                self._entropy[i] = seed
                buf.write_acting(e, self._reset(i, seed))
                if buf.state is not None:
                    self._write_state(buf, i, e)
        except ObservationError as err:
            raise self._located(i, err) from None

    def step(self, buf: StepBuffers, actions: dict[str, np.ndarray]) -> None:
        """Step every copy that has agents to move; copies whose episode ended reset."""
        buf.clear_step(self._slice, rewards=False)  # write_outcome writes each copy's row
        whole = buf.whole_actions(actions, self._slice)
        env_actions = None  # per agent, worked out only when some copy needs them
        everyone = buf.agent_order
        i = 0
        try:
            for i, e in enumerate(self.rows):
                movers = buf.movers[e]
                if not movers:
                    buf.no_outcome(e)
                    continue
                if whole is not None:
                    row = whole[i] if movers == everyone else whole[i][buf.mover_cols(e)]
                    moves = dict(zip(movers, row, strict=True))
                else:
                    if env_actions is None:
                        env_actions = buf.env_actions(actions, self._slice)
                    moves = {a: env_actions[a][i] for a in movers}
                try:
                    cs = self.copies[i].step(moves)
                except EnvContractError:
                    raise
                except Exception as err:
                    buf.no_outcome(e)
                    buf.flag(buf.dropped, e)
                    buf.write_acting(e, self._rebuild(i, "step()", err))
                    if buf.state is not None:
                        self._write_state(buf, i, e)
                    continue
                buf.write_outcome(e, cs)
                if buf.state is not None and (cs.terminated or cs.truncated):
                    self._write_state(buf, i, e, final=True)
                if cs.over:
                    self._streak[i] = 0  # a finished episode: the env can run
                    buf.flag(buf.episode_end, e)
                    cs = self._reset(i, None)
                buf.write_acting(e, cs)
                if buf.state is not None:
                    self._write_state(buf, i, e)
        except ObservationError as err:
            raise self._located(i, err) from None

    def restart(self, buf: StepBuffers) -> None:
        """Start every copy afresh with a new derived seed, dropping the episodes under way."""
        buf.clear_step(self._slice)
        i = 0
        try:
            for i, e in enumerate(self.rows):
                self._rebuilds[i] += 1
                buf.write_acting(e, self._reset(i, self._derived_seed(i)))
                if buf.state is not None:
                    self._write_state(buf, i, e)
                buf.flag(buf.dropped, e)
        except ObservationError as err:
            raise self._located(i, err) from None

    def take_failed(self) -> list[int]:
        """The rows that raised since the last call, once per failure."""
        failed, self.failed = self.failed, []
        return failed

    def close(self) -> None:
        for copy in self.copies:
            copy.close()

    def _write_state(self, buf: StepBuffers, i: int, e: int, final: bool = False) -> None:
        """Write copy ``i``'s global state (its env's ``state()``) into row ``e`` of the
        buffers' ``state`` (``final_state`` when ``final``)."""
        copy = self.copies[i]
        target = buf.final_state if final else buf.state
        assert target is not None
        try:
            value = np.asarray(copy.state(), dtype=np.float32)
        except Exception as err:
            raise EnvContractError(
                f"env {env_name(copy)} declares a state_space, but its state() raised "
                f"{type(err).__name__}: {err} (copy {self.rows[i]}, at step {copy.t} of its "
                "episode); set algo.state: observations to mix on the agents' observations"
            ) from err
        if value.size != buf.state_dim:
            raise EnvContractError(
                f"env {env_name(copy)}: state() gave an array of shape {value.shape}, but its "
                f"state_space holds {buf.state_dim} numbers (copy {self.rows[i]}, at step "
                f"{copy.t} of its episode)")
        target[e] = value.reshape(-1)

    def _located(self, i: int, err: ObservationError) -> ObservationError:
        """``err`` with the copy and the step of its episode where the env broke its spaces."""
        t = self.copies[i].t
        when = "at reset" if t == 0 else f"at step {t} of its episode"
        return ObservationError(f"env copy {self.rows[i]}, {when}: {err}")

    def _reset(self, i: int, seed: int | None) -> CopyStep:
        try:
            return self.copies[i].reset(seed=seed)
        except EnvContractError:
            raise
        except Exception as err:
            return self._rebuild(i, "reset()", err)

    def _rebuild(self, i: int, phase: str, err: Exception) -> CopyStep:
        """Replace copy ``i`` with a fresh env, reset with a new seed; retry up to the limit."""
        while True:
            self.failures += 1
            self._streak[i] += 1
            self.failed.append(self.rows[i])
            if self._streak[i] >= self.max_failures:
                text = "".join(traceback.format_exception(err))
                raise EnvCrashError(self.rows[i], phase, self.copies[i].t, self._streak[i], err,
                                    text, env_name(self.copies[i])) from err
            with contextlib.suppress(Exception):  # a broken env may not close; it goes anyway
                self.copies[i].close()
            self._rebuilds[i] += 1
            try:
                self.copies[i] = adapt(self.make(), self.max_steps)
                return self.copies[i].reset(seed=self._derived_seed(i))
            except EnvContractError:
                raise
            except Exception as again:
                err, phase = again, "reset() of a rebuilt copy"

    def _derived_seed(self, i: int) -> int:
        """A seed that depends on the copy's reset seed and its rebuild count, never equal to it."""
        entropy = self._entropy[i]
        return env_seed(np.random.SeedSequence(entropy, spawn_key=(self._rebuilds[i],)))


def env_name(copy: Any) -> str:
    """The env's own name (``metadata["name"]``, else its class) for error messages."""
    inner = getattr(getattr(copy, "env", copy), "unwrapped", getattr(copy, "env", copy))
    meta = getattr(inner, "metadata", None)
    name = meta.get("name") if isinstance(meta, dict) else None
    return str(name or type(inner).__name__)

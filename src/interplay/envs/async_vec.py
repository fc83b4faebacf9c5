"""Env copies stepped in worker processes, their steps written straight into shared memory.

Each worker owns a run of copies (an :class:`EnvCopies`), steps them, resets them when an
episode ends, and writes observations, masks, rewards and flags into one shared-memory segment
laid out like :class:`StepBuffers`; the main process returns views of the same arrays. Actions
travel the other way through the segment, so a pipe carries a few bytes per step, plus the
env's own observations when ``raw_obs`` asks for them.

Waking a process blocked on a pipe takes tens of microseconds, as long as a small env's step.
So a worker that has answered watches a doorbell in the segment for ``spin_s`` (yielding its
core to anyone who wants it) before it blocks; the main process rings it right after writing
the next message, which the worker then finds already in the pipe.

Faults: an env that raises is rebuilt inside its worker. A worker that dies, or does not answer
within ``step_timeout_s``, is killed and replaced, its copies started afresh and their episodes
dropped, up to ``max_restarts`` times. Workers and the segment go away on ``close()``, when the
env is collected, at interpreter exit, and on SIGTERM; workers also die with their parent.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import secrets
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_any
from multiprocessing.process import BaseProcess
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import cloudpickle
import numpy as np

from interplay.envs.batch import ActionBlocks, StepBuffers, VecStep, state_dim, state_space_of
from interplay.envs.copies import EnvCopies, EnvCrashError
from interplay.envs.spaces import ActionView, ObsView, action_view, obs_view
from interplay.errors import UserError
from interplay.seeding import copy_seeds

START_TIMEOUT_S = 60.0  # a worker builds its copies first: imports, assets, servers
CLOSE_GRACE_S = 1.0  # how long close() lets workers exit on their own before killing them
_ALIGN = 64
# The two messages of every step go unpickled; pickles start with b"\x80", so never collide.
_STEP = b"s"
_OK = b"k"
_OK_REPLY: tuple[str, list, None, dict] = ("ok", [], None, {})


class WorkerError(UserError, RuntimeError):
    """A worker died or hung and may not be replaced, or sent what cannot be read."""


class RemoteTraceback(Exception):
    """Where an error re-raised from a worker happened, as the worker printed it."""

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class _Layout:
    """Where every array of the step buffers and the actions sits in the segment."""

    agents: list[str]
    obs_views: dict[str, ObsView]
    action_views: dict[str, ActionView]
    num_envs: int
    state_dim: int = 0  # the env's global state, kept when asked for

    def carve(self, carver: _Carver,
              keep_raw: bool = False) -> tuple[StepBuffers, dict[str, np.ndarray], np.ndarray]:
        """The step buffers, the actions, and the doorbells (one per copy; a worker's is the
        one of its first copy). Where every agent's actions have one shape and dtype, they
        sit side by side in one ``[E, A, ...]`` array (each agent's a view of it), so that
        a policy's block is written with one write and a worker reads each copy's moves off
        one row."""
        buf = StepBuffers(self.agents, self.obs_views, self.action_views, self.num_envs, carver,
                          keep_raw, self.state_dim)
        views = [self.action_views[a] for a in self.agents]
        actions: dict[str, np.ndarray]
        if len({(v.shape, v.dtype) for v in views}) == 1:
            whole = carver((self.num_envs, len(views), *views[0].shape), 0, views[0].dtype)
            actions = ActionBlocks([(tuple(self.agents), whole)])
        else:
            actions = {a: carver((self.num_envs, *v.shape), 0, v.dtype)
                       for a, v in self.action_views.items()}
        return buf, actions, carver((self.num_envs,), 0, np.uint8)

    def size(self) -> int:
        measure = _Carver(None)
        self.carve(measure)
        return max(measure.size, 1)


class _Carver:
    """Hands out arrays one after another from ``buffer``; with no buffer, only measures."""

    def __init__(self, buffer: Any, fill: bool = True):
        self.buffer = buffer
        self.fill = fill
        self.size = 0

    def __call__(self, shape: tuple[int, ...], fill_value: Any, dtype: Any) -> np.ndarray:
        dtype = np.dtype(dtype)
        start = -(-self.size // _ALIGN) * _ALIGN
        self.size = start + int(np.prod(shape)) * dtype.itemsize
        if self.buffer is None:
            return np.full(shape, fill_value, dtype)
        array = np.ndarray(shape, dtype, buffer=self.buffer, offset=start)
        if self.fill:
            array[...] = fill_value
        return array


def _map_segment(name: str, size: int) -> Any:
    """Map the segment without a ``SharedMemory`` object, whose close() fails while numpy
    arrays still point into it, and which a worker would register for cleanup a second time."""
    import mmap

    fd = os.open(f"/dev/shm/{name}", os.O_RDWR)
    try:
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


@dataclass(eq=False)
class _Worker:
    index: int
    rows: range
    process: BaseProcess
    conn: Connection


class _Resources:
    """What must not outlive the env: worker processes, their pipes, the shared segment."""

    def __init__(self) -> None:
        self.workers: list[_Worker] = []
        self.shm: SharedMemory | None = None
        self.closed = False

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        _LIVE.discard(self)
        workers = list(self.workers)
        for w in workers:
            with contextlib.suppress(Exception):
                w.conn.send(("close",))
        deadline = time.monotonic() + CLOSE_GRACE_S
        for w in workers:
            w.process.join(max(0.0, deadline - time.monotonic()))
        for w in workers:
            _kill(w)
        if self.shm is not None:
            with contextlib.suppress(FileNotFoundError):
                self.shm.unlink()


def _kill(w: _Worker) -> None:
    if w.process.is_alive():
        with contextlib.suppress(ProcessLookupError):
            w.process.kill()
    w.process.join(5.0)
    w.conn.close()


_LIVE: weakref.WeakSet[_Resources] = weakref.WeakSet()
_PREVIOUS_SIGTERM: list[Any] = []


def _watch(res: _Resources) -> None:
    """Close ``res`` on SIGTERM too (a finalizer covers exit and collection)."""
    _LIVE.add(res)
    if _PREVIOUS_SIGTERM or threading.current_thread() is not threading.main_thread():
        return
    _PREVIOUS_SIGTERM.append(signal.signal(signal.SIGTERM, _on_sigterm))


def _on_sigterm(signum: int, frame: Any) -> None:
    previous = _PREVIOUS_SIGTERM[0]
    if callable(previous):
        # a handler of the program's own: it may stop the run now (the exception unwinds and
        # closes the envs), or ask it to stop after this step (then the envs are still needed)
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        for res in list(_LIVE):
            res.close()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


class AsyncVecEnv:
    """``num_envs`` PettingZoo copies stepped in ``num_workers`` processes at once.

    Returns exactly what :class:`SyncVecEnv` returns for the same seeds and actions. Set
    ``raw_obs`` when a scripted policy needs the env's own observations (and ``infos``);
    otherwise ``VecStep.raw_obs`` is None. ``state`` keeps the env's global state as
    :class:`SyncVecEnv` does (the workers write it into the segment too). ``stats()`` counts
    the faults survived.
    The copies live in other processes, so checkpoints cannot hold them: a resumed run
    starts fresh episodes (``snapshot_supported`` is False).
    """

    snapshot_supported = False

    def __init__(self, make: Callable[[], Any], num_envs: int = 1, max_steps: int | None = None,
                 num_workers: int | None = None, step_timeout_s: float = 60.0,
                 max_restarts: int = 10, max_failures: int = 3, raw_obs: bool = False,
                 context: str | None = None, spin_s: float = 0.0005, state: str | None = None):
        if num_envs < 1:
            raise ValueError(f"env.num_envs must be at least 1, got {num_envs}")
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"env.num_workers must be at least 1, got {num_workers}")
        if step_timeout_s <= 0:
            raise ValueError(f"env.step_timeout_s must be positive, got {step_timeout_s}")
        if max_restarts < 0:
            raise ValueError(f"env.max_restarts must be at least 0, got {max_restarts}")
        if max_failures < 1:
            raise ValueError(f"env.max_failures must be at least 1, got {max_failures}")
        if spin_s < 0:
            raise ValueError(f"spin_s must be at least 0, got {spin_s}")
        self.num_envs = num_envs
        self.max_steps = max_steps
        self.step_timeout_s = step_timeout_s
        self.max_restarts = max_restarts
        self.max_failures = max_failures
        self.raw_obs = raw_obs
        self.state_mode = state
        self.spin_s = spin_s
        self._ctx = _context(context)
        self._make = cloudpickle.dumps(make)
        self._res = _Resources()
        self._finalizer = weakref.finalize(self, self._res.close)
        _watch(self._res)
        self._seeds: list[int | None] = [None] * num_envs
        self._rebuilds = [0] * num_envs
        self._failures = self._dropped = self._restarts = 0
        n = min(num_envs, num_workers or os.cpu_count() or 1)
        bounds = np.linspace(0, num_envs, n + 1).round().astype(int)
        try:
            self._start([range(int(a), int(b)) for a, b in zip(bounds, bounds[1:], strict=False)])
        except BaseException:
            self.close()
            raise

    def _start(self, rows: list[range]) -> None:
        workers = [self._spawn(i, r, None) for i, r in enumerate(rows)]
        replies = self._gather(workers, max(self.step_timeout_s, START_TIMEOUT_S))
        for w in workers:
            self._expect(w, replies[w], "spaces")
        _, agents, obs_spaces, act_spaces, turn_based, state_space = replies[workers[0]]
        self.agents: list[str] = agents
        self.turn_based: bool = turn_based
        self.observation_spaces = obs_spaces
        self.action_spaces = act_spaces
        self.obs_views = {a: obs_view(s, a) for a, s in obs_spaces.items()}
        self.action_views = {a: action_view(s, a) for a, s in act_spaces.items()}
        self.kept_state = state_space
        layout = _Layout(agents, self.obs_views, self.action_views, self.num_envs,
                         state_dim(state_space))
        size = layout.size()
        shm = SharedMemory(f"interplay_{os.getpid()}_{secrets.token_hex(6)}", create=True,
                           size=size)
        self._res.shm = shm
        shm.close()  # the arrays live in a mapping of our own; this object only unlinks
        self.shm_name = shm.name
        # The workers write the rows; these buffers only read them, so their counts stay as
        # they start and their steps promise nothing they cannot know (all_acting, all_legal).
        self._buf, self._actions, self._bells = layout.carve(
            _Carver(_map_segment(shm.name, size)), keep_raw=self.raw_obs)
        self._attach = (shm.name, size, layout)
        self._cols: dict[tuple[str, ...], np.ndarray] = {}  # a policy's agents' columns
        for w in workers:
            w.conn.send(("attach", *self._attach))
        replies = self._gather(workers, max(self.step_timeout_s, START_TIMEOUT_S))
        for w in workers:
            self._expect(w, replies[w], "ok")

    def _expect(self, w: _Worker, reply: tuple, kind: str) -> None:
        if reply[0] == "error":
            self._raise_remote(reply)
        if reply[0] == "lost":
            raise WorkerError(
                f"async env worker {w.index} {self._loss(w, reply[1])} while starting (its own "
                "error, if any, is printed above; a script that makes an AsyncVecEnv must keep "
                "its top level under `if __name__ == \"__main__\":`, as workers import it)"
            )
        if reply[0] != kind:
            raise WorkerError(f"async env worker {w.index} answered {reply[0]!r}, not {kind!r}")

    def _spawn(self, index: int, rows: range, attach: tuple | None) -> _Worker:
        ours, theirs = self._ctx.Pipe()
        entropy = [self._seeds[e] for e in rows]
        rebuilds = [self._rebuilds[e] for e in rows]
        process = self._ctx.Process(
            target=_work, name=f"interplay-env-worker-{index}", daemon=True,
            args=(theirs, (rows.start, rows.stop), self._make, self.max_steps, self.max_failures,
                  self.raw_obs, attach, entropy, rebuilds, self.spin_s, self.state_mode),
        )
        process.start()
        theirs.close()
        worker = _Worker(index, rows, process, ours)
        if index < len(self._res.workers):
            self._res.workers[index] = worker
        else:
            self._res.workers.append(worker)
        return worker

    def reset(self, seed: int | None) -> VecStep:
        self._seeds = copy_seeds(seed, self.num_envs)
        self._round(lambda w: ("reset", self._seeds[w.rows.start:w.rows.stop]), "reset")
        return self._buf.view()

    def current_step(self) -> VecStep:
        """The latest step, as :meth:`step` or :meth:`reset` returned it."""
        return self._buf.view()

    def group(self, groups: dict[str, tuple[str, ...]]) -> None:
        """Hand each group's ``[E, k, ...]`` blocks in ``VecStep.groups`` from now on."""
        self._buf.group(groups)

    def step(self, actions: dict[str, np.ndarray]) -> VecStep:
        self._hand_over(actions)
        self._round(lambda w: _STEP, "step")
        self._dropped += int(np.count_nonzero(self._buf.dropped))
        return self._buf.view()

    def _hand_over(self, actions: dict[str, np.ndarray]) -> None:
        """Write ``actions`` where the workers read them: a policy's block with one write
        where both sides keep their agents' actions side by side, else agent by agent."""
        shared = getattr(self._actions, "blocks", None)
        blocks = getattr(actions, "blocks", None)
        if shared is None or blocks is None:
            for a, chosen in actions.items():
                self._actions[a][...] = chosen
            return
        whole = shared[0][1]
        for agents, block in blocks:
            cols = self._cols.get(agents)
            if cols is None:
                cols = self._cols[agents] = self._buf.cols_of(agents)
            whole[:, cols] = block

    def stats(self) -> dict[str, int]:
        """Faults so far: env copies that raised, episodes abandoned, workers replaced."""
        return {"env_failures": self._failures, "episodes_dropped": self._dropped,
                "worker_restarts": self._restarts}

    def restored(self) -> None:
        """Nothing: no snapshot is put back into copies in other processes."""

    def worker_pids(self) -> list[int | None]:
        return [w.process.pid for w in self._res.workers]

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> AsyncVecEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _round(self, message: Callable[[_Worker], tuple | bytes], phase: str) -> None:
        """Send every worker its message and take in every answer, replacing lost workers."""
        if self._res.closed:
            raise RuntimeError(f"{phase}() on a closed AsyncVecEnv")
        try:
            workers = list(self._res.workers)
            for w in workers:
                with contextlib.suppress(OSError):  # a dead worker shows up in _gather
                    _send(w.conn, message(w))
                self._bells[w.rows.start] = 1  # after the message: it is in the pipe now
            replies = self._gather(workers, self.step_timeout_s)
            for w in workers:
                reply = replies[w]
                if reply[0] == "ok":
                    self._take(w, reply)
                elif reply[0] == "lost":
                    self._replace(w, self._loss(w, reply[1]), phase)
                else:
                    self._raise_remote(reply)
        except BaseException:
            self.close()  # answers may be left in the pipes: the env cannot go on
            raise

    def _take(self, w: _Worker, reply: tuple) -> None:
        _, failed, raw, final_infos = reply
        for e, infos in final_infos.items():
            self._buf.final_infos[e] = infos
        self._failures += len(failed)
        for e in failed:
            self._rebuilds[e] += 1
        if raw is not None:
            for e, (obs, infos) in zip(w.rows, raw, strict=True):
                self._buf.raw_obs[e] = obs
                self._buf.infos[e] = infos

    def _replace(self, w: _Worker, why: str, phase: str) -> None:
        while True:
            if self._restarts >= self.max_restarts:
                limit = ("restarts are off (env.max_restarts=0)" if self.max_restarts == 0 else
                         f"all {self.max_restarts} restarts allowed by env.max_restarts are used")
                raise WorkerError(
                    f"async env worker {w.index} (pid {w.process.pid}, env copies "
                    f"{w.rows.start}..{w.rows.stop - 1}) {why}; {limit}"
                )
            self._restarts += 1
            w = self._spawn(w.index, w.rows, self._attach)
            reply = self._gather([w], max(self.step_timeout_s, START_TIMEOUT_S))[w]
            if reply[0] == "lost":
                why = f"was replaced, but the replacement {self._loss(w, reply[1])}"
                continue
            if reply[0] != "ok":
                self._raise_remote(reply)
            for e in w.rows:
                self._rebuilds[e] += 1
            self._take(w, reply)
            if phase == "reset":  # nothing was under way: these are simply new episodes
                self._buf.dropped[w.rows.start:w.rows.stop] = False
            return

    def _gather(self, workers: list[_Worker], timeout: float) -> dict[_Worker, tuple]:
        """Each worker's answer, or ``("lost", timeout or None)`` if it hung or died."""
        waiting: dict[Any, _Worker] = {}
        for w in workers:
            waiting[w.conn] = waiting[w.process.sentinel] = w
        out: dict[_Worker, tuple] = {}
        deadline = time.monotonic() + timeout
        while len(out) < len(workers):
            left = deadline - time.monotonic()
            if left <= 0:
                out.update((w, ("lost", timeout)) for w in workers if w not in out)
                break
            for ready in wait_any(list(waiting), timeout=left):
                answered = waiting.get(ready)
                if answered is None or answered in out:
                    continue
                out[answered] = _receive(answered, ready is answered.conn)
                del waiting[answered.conn], waiting[answered.process.sentinel]
        return out

    def _loss(self, w: _Worker, hung_after: float | None) -> str:
        """Kill what is left of ``w`` and say what happened to it."""
        _kill(w)
        if hung_after is not None:
            limit = " (env.step_timeout_s)" if hung_after == self.step_timeout_s else ""
            return f"did not answer within {hung_after:g} s{limit}"
        code = w.process.exitcode
        if code is not None and code < 0:
            return f"was killed by signal {signal.Signals(-code).name}"
        return f"exited with code {code}"

    def _raise_remote(self, reply: tuple) -> None:
        _, err, text = reply
        if text:
            raise err from RemoteTraceback(text)
        raise err


def _send(conn: Connection, message: tuple | bytes) -> None:
    if isinstance(message, bytes):
        conn.send_bytes(message)
    else:
        conn.send(message)


def _receive(w: _Worker, readable: bool) -> tuple:
    """The worker's answer; ``readable`` says its pipe, not its death, woke us."""
    try:
        if readable or w.conn.poll():
            data = w.conn.recv_bytes()
            return _OK_REPLY if data == _OK else cloudpickle.loads(data)
    except (EOFError, OSError):
        pass
    except Exception as err:
        return ("error", WorkerError(f"async env worker {w.index} sent a message that cannot "
                                     f"be read: {type(err).__name__}: {err}"), "")
    return ("lost", None)


def _context(name: str | None) -> Any:
    """forkserver where there is one (fast starts, no fork of a threaded parent), else spawn."""
    name = name or ("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    if name not in ("forkserver", "spawn"):
        raise ValueError(f"AsyncVecEnv context must be forkserver or spawn, got {name!r}")
    ctx = mp.get_context(name)
    if name == "forkserver":
        ctx.set_forkserver_preload([__name__])  # each worker then starts with us imported
    return ctx


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _work(conn: Connection, rows: tuple[int, int], make_blob: bytes, max_steps: int | None,
          max_failures: int, raw_obs: bool, attach: tuple | None,
          entropy: list[int | None], rebuilds: list[int], spin_s: float,
          state: str | None = None) -> None:
    """A worker: build its copies, map the segment, then serve reset/step until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    _die_with_parent()
    span = range(*rows)
    copies: EnvCopies | None = None
    try:
        copies = EnvCopies(cloudpickle.loads(make_blob), span, max_steps, max_failures, entropy,
                           rebuilds)
        if attach is None:
            first = copies.copies[0]
            agents = list(first.possible_agents)
            conn.send(("spaces", agents, {a: first.observation_space(a) for a in agents},
                       {a: first.action_space(a) for a in agents}, first.turn_based,
                       state_space_of(first, state)))
            attach = conn.recv()[1:]
            fresh = False
        else:
            fresh = True
        name, size, layout = attach
        buf, actions, bells = layout.carve(_Carver(_map_segment(name, size), fill=False),
                                           raw_obs)
        bell = span.start
        if fresh:
            copies.restart(buf)
        while True:
            failed = copies.take_failed()
            if failed or raw_obs or buf.ended:  # episode ends are rare: their infos go along
                conn.send(("ok", failed, [(buf.raw_obs[e], buf.infos[e]) for e in span]
                           if raw_obs else None, {e: buf.final_infos[e] for e in buf.ended}))
            else:
                conn.send_bytes(_OK)
            _await_bell(bells, bell, spin_s)
            data = conn.recv_bytes()
            if data == _STEP:
                copies.step(buf, actions)
                continue
            message = cloudpickle.loads(data)
            if message[0] == "reset":
                copies.reset(buf, message[1])
            else:
                break
    except (EOFError, BrokenPipeError):
        pass  # the main process is gone
    except BaseException as err:
        _send_error(conn, err)
    finally:
        if copies is not None:
            with contextlib.suppress(Exception):
                copies.close()


def _await_bell(bells: np.ndarray, i: int, spin_s: float) -> None:
    """Watch doorbell ``i`` for up to ``spin_s``, yielding the core meanwhile; clear it.

    A ring may be missed (it came after the watch) or be stale (it came after the message was
    read): either way the pipe, read next, says what to do; only the wait may be longer.
    """
    if spin_s:
        deadline = time.perf_counter() + spin_s
        while not bells[i] and time.perf_counter() < deadline:
            _yield()
    bells[i] = 0


_yield = getattr(os, "sched_yield", lambda: time.sleep(0))  # not every platform has it


def _send_error(conn: Connection, err: BaseException) -> None:
    """Hand the worker's error to the main process, as itself where it can be pickled."""
    text = "".join(traceback.format_exception(err))
    plain = WorkerError(f"an env copy in an async worker raised {type(err).__name__}: {err}")
    if not isinstance(err, Exception):  # SystemExit from an env must not end the main process
        err = plain
    if isinstance(err, EnvCrashError):
        try:
            cloudpickle.dumps(err.original)
        except Exception:
            err.original = None
    for sent in (err, plain):
        try:
            conn.send(("error", sent, text))
            return
        except (EOFError, BrokenPipeError):
            return
        except Exception:  # noqa: S112 - not picklable: send the plain text instead
            continue

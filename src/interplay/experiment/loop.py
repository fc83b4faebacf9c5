"""The training loop a user lives in: collect, learn, report, test, checkpoint, resume.

An :class:`Experiment` is built from a config and a run folder. Its whole state (counters,
every RNG, the algorithm, the runner's open transitions, the env copies' own data, the
callbacks' state, and a record of what wrote it) goes into each checkpoint, so ``resume``
continues exactly where the run stopped; where the env copies cannot be put back (subprocess
copies, a changed number of copies) it continues with fresh episodes and warns why
(:mod:`interplay.experiment.run_store.resume_check`).
"""

from __future__ import annotations

import json
import random
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from interplay.backends.ray.cluster import check_learner_device, require_ray
from interplay.backends.ray.env_runner import num_copies, ray_runners
from interplay.backends.ray.runners import RayRunners, RunnerFailedError
from interplay.config.code import load_callable
from interplay.config.describe import to_yaml
from interplay.config.distributions import varied
from interplay.config.schema import Config
from interplay.envs.snapshot import capture, restore
from interplay.errors import ConfigError, UserError, WriteError
from interplay.experiment.attach import Attachment, build_attachments
from interplay.experiment.build import (
    check_target_metric,
    make_callbacks,
    make_specs,
    make_vec_env,
    policies_to_train,
    resolve_device,
)
from interplay.experiment.env_options import EnvOptionsLog
from interplay.experiment.parts import build_parts, build_runner, make_runner
from interplay.experiment.run_store.checkpoint import (
    CheckpointError,
    save_checkpoint,
)
from interplay.experiment.run_store.interrupt import Interrupted, StopRequest
from interplay.experiment.run_store.resume_check import (
    check_loadable,
    check_spaces,
    load_failure,
    open_run,
    run_record,
    spaces_of,
)
from interplay.experiment.run_store.run_folder import hold, start_afresh
from interplay.experiment.run_store.trust import require_trust
from interplay.experiment.update_means import UpdateMeans
from interplay.experiment.warm_start import requests as warm_requests
from interplay.experiment.warm_start import warm_start
from interplay.loggers.base import Logger
from interplay.loggers.console import ConsoleLogger
from interplay.loggers.curve import plot_curve
from interplay.loggers.jsonl import JsonlLogger
from interplay.run.actors import Actor
from interplay.run.callbacks import Callbacks
from interplay.run.runner import Runner
from interplay.seeding import derived_seed

STATE_FORMAT = 1
WrappedActor = TypeVar("WrappedActor", bound=Actor)


@dataclass
class Result:
    run_dir: Path
    env_steps: int
    episodes: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    stopped_early: bool = False
    checkpoint: Path | None = None

    @property
    def last(self) -> dict[str, Any]:
        return self.rows[-1] if self.rows else {}

    @property
    def last_test(self) -> dict[str, Any]:
        return next((r for r in reversed(self.rows) if r["phase"] == "test"), {})


class Experiment:
    """What ``train`` runs: the env copies, policies, storage and loop of ``cfg``.

    ``attach=False`` leaves out what registered builders attach (a league's pool: evaluation
    plays the policies alone); see :mod:`interplay.experiment.attach`.
    """

    def __init__(self, cfg: Config, run_dir: Path, callbacks: Sequence[Callbacks] = (),
                 attach: bool = True):
        if cfg.train.torch_threads:
            torch.set_num_threads(cfg.train.torch_threads)
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.device = resolve_device(cfg.train.device)
        remote = cfg.backend.name == "ray"
        if remote:
            require_ray()
            check_learner_device(cfg.backend, self.device, cfg.train.device)
        # With Ray env runners the copies live in the runners: this env is a probe of one.
        built = build_parts(cfg, self.device, 1 if remote else None)
        self.env = built.env
        self.specs, self.algo, self.actors = built.specs, built.algo, built.actors
        self.remote: RayRunners | None = None
        self.runner: Runner  # or the Ray runners, which the loop steps the same way
        self.attached: list[Attachment] = []
        try:
            self.eval_actors = dict(self.actors)  # test phases: the policies themselves
            if attach:
                self.attached = build_attachments(cfg, self)
            varies = bool(varied(cfg.env.kwargs) or cfg.env.reset_options)
            self.callbacks = make_callbacks(
                cfg, [*callbacks, *self.attached,
                      *([EnvOptionsLog(self.run_dir, cfg.log.split_by)] if varies else [])])
            self.storage = self.algo.make_storage(num_copies(cfg))  # the loop's
            collect = ({p for p, s in self.specs.items() if s.trainable}
                       if self.storage is not None else set())
            check_target_metric(cfg, self.specs, self.env.agents, self.callbacks)
            if remote:
                self.remote = ray_runners(cfg, self, collect, callbacks, self._marks, build_runner)
                self.env.close()
                self.env = self.runner = self.remote  # type: ignore[assignment]
            else:
                self.runner = make_runner(cfg, built, collect, self.callbacks)
            self.runner.experiment = self  # what callbacks reach through ``runner``
        except BaseException:
            self.env.close()
            raise
        self.eval_runner: Runner | None = None
        every = cfg.checkpoint.every
        self.report_every = cfg.log.every_for(cfg.env.num_envs)
        self.counters = {
            "next_report": self.report_every,
            "next_test": cfg.train.test_frequency if cfg.train.test_frequency > 0 else -1,
            "next_checkpoint": every if every > 0 else -1,
            "next_video": cfg.train.render_every if cfg.train.render_every > 0 else -1,
            "tests": 0, "rows": 0, "wall_s": 0.0, "stopped_early": False,
        }
        self.update_means = UpdateMeans(self.algo.gauges)
        self.started = False
        self._stop: StopRequest | None = None
        self._no_video = False  # drawing failed once: no more videos this run

    def wrap_actor(self, pid: str, wrap: Callable[[Actor], WrappedActor]) -> WrappedActor:
        """Have ``wrap(actor)`` act for policy ``pid`` in training, in place of its actor, and
        return it: for attachments (a league's pool acting on the learner's opponent seats),
        while the run is built. Test phases keep the policy's own actor."""
        if "runner" in self.__dict__:
            raise RuntimeError(f"policy {pid!r}: its actor can be wrapped only while the run is "
                               "built (by an attachment); the runner already holds it")
        if pid not in self.actors:
            raise ValueError(f"no policy is called {pid!r}; policies are {sorted(self.actors)}")
        wrapped = wrap(self.actors[pid])
        self.actors[pid] = wrapped
        return wrapped

    def set_policies_to_train(self, pids: Sequence[str]) -> None:
        """Train only ``pids`` (ids or glob patterns) from now on; the other trained policies
        act with their current weights and are not updated. For callbacks (alternating
        training, say): ``runner.experiment.set_policies_to_train(["prey"])``."""
        trained = [p for p, s in self.specs.items() if s.trainable]
        self.cfg.train.policies_to_train = list(pids)
        self.algo.set_training(policies_to_train(self.cfg, trained))

    # -- state -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "counters": dict(self.counters),
            "spaces": spaces_of(self.specs),
            "rng": {"python": random.getstate(), "numpy": np.random.get_state(),
                    "torch": torch.get_rng_state()},
            "algo": self.algo.state_dict(),
            "storage": self.storage.state_dict() if self.storage and self.storage.saved else None,
            "actors": {p: a.state_dict() for p, a in self.actors.items() if hasattr(a, "state_dict")},
            "runner": self.runner.state_dict(),
            "env": self._env_state(),
            "learner": self.update_means.state_dict(),  # (the key checkpoints have)
            "callbacks": self.callbacks.state_dict(),
            "run": run_record(self.cfg, self.algo, self.specs),
        }

    def _env_state(self) -> Any:
        if self.remote is not None:
            return self.remote.env_state()
        if not self.env.snapshot_supported:
            return None
        self.env.current_step()  # writes any observations its last step left unwritten
        return capture(self.env)

    def _marks(self) -> list[int]:
        """Env-step counts where the runners must be where the loop is (a checkpoint)."""
        marks = [self.cfg.train.steps, int(self.counters["next_checkpoint"])]
        if self._stop is not None and self._stop.requested:  # to end in a checkpoint
            marks.append(self.runner.env_steps)
        return marks

    def load_state_dict(self, state: dict[str, Any], source: str = "the checkpoint") -> None:
        if state.get("format") != STATE_FORMAT:
            raise CheckpointError(f"checkpoint state format {state.get('format')!r} is not {STATE_FORMAT}")
        fresh = check_loadable(state, self, source)  # refuses what cannot be loaded, before any step
        if fresh:
            warnings.warn(
                f"resuming {source} with fresh episodes, so not exactly: {'; '.join(fresh)}. The "
                "counters, the learner and every RNG continue; the episodes under way at the "
                "checkpoint are dropped", stacklevel=2)
        try:
            self._restore(state, fresh=bool(fresh))
        except UserError:
            raise
        except (KeyError, IndexError, ValueError, TypeError, RuntimeError) as err:
            raise load_failure(state, self, source, err) from err

    def _restore(self, state: dict[str, Any], fresh: bool) -> None:
        if fresh:
            self.runner.reset(derived_seed(self.cfg.train.seed, "resume",
                                           str(state["runner"]["counters"][0])))
        elif self.remote is not None:
            self.remote.reset(self.cfg.train.seed)
            self.remote.restore_env(state["env"])
        else:
            self.runner.reset(self.cfg.train.seed)  # builds everything a snapshot fills back in
            restore(self.env, state["env"])
            self.env.restored()  # what the env derives from its data
        self.runner.load_state_dict(state["runner"], episodes=not fresh)
        self.algo.load_state_dict(state["algo"])
        if self.storage is not None:
            self.storage.load_state_dict(state["storage"])
        for pid, s in state["actors"].items():
            self.actors[pid].load_state_dict(s)  # type: ignore[attr-defined]  # saved only if it has one
        self.callbacks.load_state_dict(state.get("callbacks", {}))
        self.counters.update(state["counters"])
        self.update_means.load_state_dict(state["learner"])
        rng = state["rng"]
        random.setstate(rng["python"])
        np.random.set_state(rng["numpy"])
        torch.set_rng_state(rng["torch"])
        self.started = True

    # -- the loop ------------------------------------------------------------------------
    def learn_step(self) -> None:
        """One step of every copy: what it closed is stored and collected, and the algorithm
        learns when it is ready."""
        runner = self.runner
        for pid, batch in runner.step(explore=True).items():
            for part in self.attached:
                batch = part.kept(pid, batch)
            if self.storage is not None:  # (batches come only when there is storage)
                self.storage.add(pid, batch)
            self.algo.collect(pid, batch)
        if self.storage is not None:
            self.storage.end_step(runner.env_steps)
        if self.algo.ready(self.storage, runner.env_steps):
            self.callbacks.on_sample_end(runner=runner, env_steps=runner.env_steps)
            began = time.perf_counter()
            self.update_means.add(self.algo.update(self.storage))
            if self.remote is not None:
                self.remote.learned(time.perf_counter() - began)

    def run(self, stop: StopRequest | None = None) -> Result:
        """Train to ``train.steps``; a signal that ``stop`` defers ends the run in a checkpoint."""
        cfg, runner, c = self.cfg, self.runner, self.counters
        stop = self._stop = stop or StopRequest()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        config = self.run_dir / "config.yaml"
        try:
            config.write_text(to_yaml(cfg))
        except OSError as err:
            raise WriteError.of(config, err) from err
        loggers = Loggers(cfg, self.run_dir, int(c["rows"]),
                          runner.env_steps if self.started else None)
        result = Result(run_dir=self.run_dir, env_steps=runner.env_steps, episodes=runner.episodes)
        total = cfg.train.steps
        start = time.perf_counter() - c["wall_s"]
        self._last_t, self._last_steps = time.perf_counter(), runner.env_steps
        self._window_before: tuple[float, int] | None = None  # start of the previous window
        try:
            if not self.started:
                runner.reset(cfg.train.seed)
                self.started = True
            while (total < 0 or runner.env_steps < total) and not c["stopped_early"]:
                if stop.requested and (self.remote is None or self.remote.settled):
                    result.checkpoint = self.save()
                    raise Interrupted(stop.signum or 0, self.run_dir, result.checkpoint,
                                      runner.env_steps)
                self.learn_step()
                steps = runner.env_steps
                if steps >= c["next_report"]:
                    c["next_report"] = steps + self.report_every
                    if not runner.collecting:  # nothing learns: a report closes a stretch of sampling
                        self.callbacks.on_sample_end(runner=runner, env_steps=steps)
                    self._report(loggers, result, start)
                if c["next_test"] > 0 and steps >= c["next_test"]:
                    c["next_test"] = steps + cfg.train.test_frequency
                    self._test(loggers, result)
                if c["next_video"] > 0 and steps >= c["next_video"]:
                    c["next_video"] = steps + cfg.train.render_every
                    self._video(loggers, steps)
                if c["next_checkpoint"] > 0 and steps >= c["next_checkpoint"]:
                    c["next_checkpoint"] = steps + cfg.checkpoint.every
                    result.checkpoint = self.save()
                elif steps % 256 == 0:
                    loggers.console.advance(steps)
            # The last checkpoint is taken before the closing reports that fall between the
            # regular ones, so a resumed run reports exactly as one that never stopped.
            if cfg.checkpoint.at_end:
                result.checkpoint = self.save()
            steps = runner.env_steps
            if loggers.last_step.get("train") != steps:
                self._report(loggers, result, start)
            if c["next_test"] > 0 and not c["stopped_early"] and loggers.last_step.get("test") != steps:
                self._test(loggers, result)
        except RunnerFailedError as err:
            result.checkpoint = self.save()  # the learner as it is; no episodes under way
            raise RunnerFailedError(
                f"{err}; the run stopped in checkpoint {result.checkpoint}, which "
                f"`interplay resume {self.run_dir}` continues") from None
        finally:
            loggers.close(result.last, list(self.specs), self.env.agents)
        if cfg.log.curve:
            plot_curve(self.run_dir / "metrics.jsonl", self.run_dir / "curve.png")
        result.env_steps, result.episodes = runner.env_steps, runner.episodes
        return result

    def _report(self, loggers: Loggers, result: Result, start: float) -> None:
        now = time.perf_counter()
        c = self.counters
        c["wall_s"] = now - start
        steps = self.runner.env_steps
        # A window shorter than the report interval (the closing one) is measured together
        # with the one before it, so no rate comes from a handful of steps.
        since_t, since_steps = self._last_t, self._last_steps
        if steps - since_steps < self.report_every and self._window_before is not None:
            since_t, since_steps = self._window_before
        rate = (steps - since_steps) / max(now - since_t, 1e-9)
        self._window_before = (self._last_t, self._last_steps)
        self._last_t, self._last_steps = now, steps
        overall = steps / max(c["wall_s"], 1e-9)
        row = train_row(self.runner, c["wall_s"], rate, overall, self.update_means.take())
        row.update(self.env.stats())
        for part in self.attached:
            row.update(part.report(steps))
        self._emit(loggers, result, row)

    def _test(self, loggers: Loggers, result: Result) -> None:
        row = self.test_phase(self.counters["wall_s"])
        self._emit(loggers, result, row)
        if self.cfg.train.target is not None and _reached(row, self.cfg.train):
            self.counters["stopped_early"] = result.stopped_early = True

    def _video(self, loggers: Loggers, steps: int) -> None:
        """One greedy episode drawn into ``videos/step_<steps>``; an env that cannot be drawn
        is reported once, and the run goes on without videos."""
        from interplay.experiment.recording import record_episodes
        from interplay.loggers.video import video_suffix, write_video

        if self._no_video:
            return
        dest = self.run_dir / "videos" / f"step_{steps}{video_suffix()}"
        try:
            frames, durations = record_episodes(
                self.cfg, self, self.cfg.env.eval_id or self.cfg.env.id,
                seed=derived_seed(self.cfg.train.seed, "video", str(steps)))
            write_video(frames, durations, dest)
            loggers.video(frames, durations, steps, dest)
        except Exception as err:  # noqa: BLE001 - a drawing that fails must not end training
            self._no_video = True
            warnings.warn(f"train.render_every: no video at env step {steps} ({type(err).__name__}: "
                          f"{err}); the run goes on without videos", stacklevel=2)

    def _emit(self, loggers: Loggers, result: Result, row: dict[str, Any]) -> None:
        loggers.write(row)
        self.counters["rows"] += 1
        result.rows.append(row)

    def save(self) -> Path:
        try:
            path = save_checkpoint(self.run_dir, self.runner.env_steps, self.state_dict(),
                                   keep=self.cfg.checkpoint.keep)
        except OSError as err:
            raise WriteError.of(self.run_dir / "checkpoints", err,
                                "the checkpoints written before are intact") from err
        for part in self.attached:
            part.checkpointed(self.run_dir)
        if self.cfg.log.curve:
            plot_curve(self.run_dir / "metrics.jsonl", self.run_dir / "curve.png")
        return path

    def test_phase(self, wall_s: float) -> dict[str, Any]:
        """Greedy policies on the eval env for ``train.test_episodes`` episodes."""
        cfg = self.cfg
        if self.eval_runner is None:
            n = min(cfg.env.num_envs, cfg.train.test_episodes)
            self.eval_runner = build_eval_runner(cfg, self, n, cfg.env.eval_id)
        ev = self.eval_runner
        ev.window.reset()
        ev.window.limit = cfg.train.test_episodes
        ev.reset(derived_seed(cfg.train.seed, "test", str(self.counters["tests"])))
        self.counters["tests"] += 1
        start = time.perf_counter()
        while len(ev.window) < cfg.train.test_episodes:
            ev.step(explore=False)
        rate = ev.env_steps / max(time.perf_counter() - start, 1e-9)
        row = {"phase": "test", "env_steps": self.runner.env_steps,
               "agent_steps": self.runner.agent_steps, "episodes": self.runner.episodes,
               "episodes_in_report": len(ev.window), "wall_s": round(wall_s, 3),
               "env_steps_per_s": round(rate, 1)}
        row.update(ev.window.summary())
        ev.window.reset()
        return row

    def close(self) -> None:
        self.env.close()
        for part in self.attached:
            part.close()
        if self.eval_runner is not None:
            self.eval_runner.env.close()


def build_eval_runner(cfg: Config, exp: Experiment, num_envs: int, env_id: Any = None) -> Runner:
    env, copies = make_vec_env(cfg, num_envs=num_envs, env_id=env_id, keep_state=False)
    try:
        check_spaces(spaces_of(exp.specs), make_specs(cfg, env), what=f"env {env_id or cfg.env.id!r}")
        return Runner(env, exp.specs, exp.eval_actors, set(), exp.callbacks, copies)
    except BaseException:
        env.close()
        raise


def _reached(row: dict[str, Any], train: Any) -> bool:
    value = row.get(train.target_metric)  # checked up front; a custom one may be absent
    return value is not None and value >= train.target


# What train_row and test_phase report besides the episodes' figures (Window.metric_docs), the
# learner's (Algorithm.metric_docs) and the env's (STATS_DOCS), for the glossary.
ROW_DOCS = {
    "phase": "`train`, or `test` for a test phase (greedy policies on the eval env)",
    "env_steps": "env steps so far in the run (one call of a copy's `step`, all copies together)",
    "agent_steps": "agent transitions so far (one per acting agent per env step)",
    "episodes": "training episodes finished so far",
    "episodes_in_report": "episodes the row's figures are over (finished since the previous "
                          "row of its phase)",
    "wall_s": "seconds since the run began, test phases and checkpoints included (a resumed "
              "run continues the count)",
    "env_steps_per_s": "train rows: env steps per second since the previous train row; test "
                       "rows: the eval env's rate during the test phase",
    "run_env_steps_per_s": "train rows: env steps over `wall_s`, the whole run's rate",
}


def train_row(runner: Runner, wall_s: float, rate: float, overall: float,
              learner: dict[str, float | None]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "phase": "train",
        "env_steps": runner.env_steps,
        "agent_steps": runner.agent_steps,
        "episodes": runner.episodes,
        "episodes_in_report": len(runner.window),
        "wall_s": round(wall_s, 3),
        "env_steps_per_s": round(rate, 1),
        "run_env_steps_per_s": round(overall, 1),
    }
    row.update(runner.window.summary())
    row.update(learner)
    runner.window.reset()
    return row


class Loggers:
    """metrics.jsonl, the console, TensorBoard and W&B, fed the same rows."""

    def __init__(self, cfg: Config, run_dir: Path, keep_rows: int, resumed_at: int | None = None):
        metrics = run_dir / "metrics.jsonl"
        self.last_step: dict[str, int] = {}  # each phase's last row's env_steps, kept ones too
        for line in reversed(truncate_lines(metrics, keep_rows)):
            try:
                row = json.loads(line)
                self.last_step.setdefault(row["phase"], row["env_steps"])
            except (ValueError, TypeError, KeyError):  # not a row of ours: it cannot repeat one
                continue
            if len(self.last_step) == 2:
                break
        self.jsonl = JsonlLogger(metrics)
        self.console = ConsoleLogger(cfg.train.steps, cfg.log.shows("console"))
        self.others: list[tuple[str, Logger]] = []
        if cfg.log.shows("tensorboard"):
            from interplay.loggers.tensorboard import TensorBoardLogger

            # What was logged after the checkpoint is logged again: TensorBoard is to hide it.
            # Rows at the checkpoint's own step stay if they came before it (they are kept).
            purge = None
            if resumed_at is not None:
                purge = resumed_at + 1 if resumed_at in self.last_step.values() else resumed_at
            self.others.append(("tensorboard", TensorBoardLogger(run_dir / "tensorboard", purge)))
        if cfg.log.shows("wandb"):
            from interplay.loggers.wandb import WandbLogger

            self.others.append(("wandb", WandbLogger(
                run_dir, cfg.log.wandb_project, cfg.model_dump(mode="json"),
                mode=cfg.log.wandb_mode)))
        for path in cfg.log.own_loggers():
            self.others.append((path, own_logger(path, run_dir, cfg.model_dump(mode="json"))))

    def write(self, row: dict[str, Any]) -> None:
        self.jsonl.write(row)
        self.last_step[row["phase"]] = row["env_steps"]
        self.console.report(row)
        self._each("write", row)

    def video(self, frames: np.ndarray, durations: list[float], step: int, path: Path) -> None:
        self._each("video", "video/test", frames, durations, step, path)

    def _each(self, method: str, *args: Any) -> None:
        """Call ``method`` of every other logger that has it. The built-in ones' errors (a full
        disk) go up; a user's logger that raises is reported once and left out."""
        for name, logger in list(self.others):
            call = getattr(logger, method, None)
            if call is None:
                continue
            if ":" not in name:
                call(*args)
                continue
            try:
                call(*args)
            except Exception as err:
                warnings.warn(f"log.loggers: {name} raised {type(err).__name__} in {method}(): "
                              f"{err}; it is left out for the rest of the run", stacklevel=2)
                self.others.remove((name, logger))

    def close(self, last: dict[str, Any], policies: list[str], agents: list[str]) -> None:
        self.jsonl.close()
        self._each("close")
        self.console.summary(last, policies, agents)


def truncate_lines(path: Path, keep: int) -> list[str]:
    """Keep and return the first ``keep`` lines of ``path`` (rows after the checkpoint go)."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines(keepends=True)
    if len(lines) > keep:
        path.write_text("".join(lines[:keep]))
    return lines[:keep]


def train(cfg: Config, run_dir: str | Path | None = None, *,
          callbacks: Sequence[Callbacks] = (), overwrite: bool = False,
          trust: bool = True) -> Result:
    """Train as ``cfg`` says; writes the run folder and returns what was reported.

    A folder that already holds a run is refused, unless ``overwrite`` deletes that run first.
    SIGINT or SIGTERM ends the run in a checkpoint and :class:`Interrupted`. ``trust=False``
    refuses run folders the config names (``policies.*.from``, ``league.fixed``) whose own
    configs name code; the CLI asks for ``--trust``.
    """
    from interplay.experiment.build import new_run_dir

    require_trust("the config", cfg.model_dump(by_alias=True), (), trust, "train", own=True)
    named = bool(run_dir)
    run_dir = Path(run_dir) if run_dir else new_run_dir(cfg)
    with hold(run_dir, made=not named), StopRequest() as stop:
        start_afresh(run_dir, overwrite)
        exp = Experiment(cfg, run_dir, callbacks)
        try:
            warm_start(exp.algo, exp.specs, warm_requests(cfg, exp.specs), run_dir)
            with stop.deferring():
                return exp.run(stop)
        finally:
            exp.close()


def resume(run_dir: str | Path, overrides: Sequence[str] = (), checkpoint: str | Path | None = None,
           callbacks: Sequence[Callbacks] = (), trust: bool = True) -> Result:
    """Continue a run from its newest valid checkpoint (or ``checkpoint``).

    ``trust=False`` refuses a folder whose config names modules other than installed env
    packages (see :mod:`interplay.experiment.run_store.trust`); the CLI asks for ``--trust``.
    """
    with hold(Path(run_dir), create=False), StopRequest() as stop:
        cfg, state, path = open_run(Path(run_dir), overrides, checkpoint, trust, "resume")
        exp = Experiment(cfg, Path(run_dir), callbacks)
        try:
            exp.load_state_dict(state, source=f"checkpoint {path}")
            exp.counters["stopped_early"] = False
            with stop.deferring():
                return exp.run(stop)
        finally:
            exp.close()


def own_logger(path: str, run_dir: Path, config: dict[str, Any]) -> Logger:
    """The logger ``module:Class`` names (``log.loggers``), built as ``Class(run_dir, config)``;
    named errors for one that cannot be imported, built, or has no ``write`` and ``close``."""
    where = "log.loggers"
    cls = load_callable(path, where)
    try:
        logger = cls(run_dir, config)
    except Exception as err:
        raise ConfigError(f"{where}: building logger {path!r} raised {type(err).__name__}: "
                          f"{err}") from err
    missing = [m for m in ("write", "close") if not callable(getattr(logger, m, None))]
    if missing:
        raise ConfigError(f"{where}: logger {path!r} has no {' or '.join(missing)} method; a "
                          "logger takes write(row) and close()")
    return logger

"""What each Ray env runner is built from: the run's own builder, on seeds of its own.

``build_env_runner`` runs inside each Ray actor (see :mod:`interplay.backends.ray.runners`) and
calls the builder the run hands it (``interplay.experiment.parts.build_runner``, which builds
the parts as a local run does); ``ray_runners`` is where a run picks Ray env runners instead
of its local runner.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from typing import Any

import torch

from interplay.backends.ray.riders import Passenger
from interplay.backends.ray.runners import RayRunners, RunnerParts
from interplay.config.schema import Config
from interplay.run.callbacks import Callbacks
from interplay.seeding import runner_seed

Build = Callable[[Config, Sequence[Callbacks], Collection[str], int], RunnerParts]
"""Builds a runner from (config, extra callbacks, policies collected from, env copies)."""


def build_env_runner(build: Build, cfg: Config, extra: Sequence[Callbacks],
                     collect: Collection[str], index: int, restarts: int) -> RunnerParts:
    """Runner ``index``'s env copies, policies and runner; every runner but the first (as
    first built) draws from seeds of its own."""
    seed = runner_seed(cfg.train.seed, index, restarts)
    if seed != cfg.train.seed:
        cfg = cfg.model_copy(update={"train": cfg.train.model_copy(update={"seed": seed})})
    torch.set_num_threads(cfg.train.torch_threads or 1)
    return build(cfg, extra, collect, per_runner(cfg))


def per_runner(cfg: Config) -> int:
    """Env copies on each Ray env runner."""
    return cfg.backend.envs_per_runner or cfg.env.num_envs


def num_copies(cfg: Config) -> int:
    """Env copies the run steps in all: ``env.num_envs``, or every Ray runner's."""
    if cfg.backend.name != "ray":
        return cfg.env.num_envs
    return per_runner(cfg) * cfg.backend.num_env_runners


def ray_runners(cfg: Config, exp: Any, collect: Collection[str], extra: Sequence[Callbacks],
                marks: Callable[[], list[int]], build: Build) -> RayRunners:
    """The Ray env runners of experiment ``exp`` (its env is a probe of one copy), each built
    by ``build``; the parts attached to ``exp`` that are passengers ride along."""
    passengers = [p for p in getattr(exp, "attached", []) if isinstance(p, Passenger)]
    riders = [p.rider() for p in passengers]
    build_one = functools.partial(build_env_runner, build, cfg, [*extra, *riders], set(collect))
    owner = {a: pid for pid, s in exp.specs.items() for a in s.agents}
    storage = exp.storage
    return RayRunners(cfg.backend, build_one, exp.env, per_runner(cfg), cfg.train.seed,
                      (exp.algo, exp.actors), bool(collect),
                      lambda: exp.algo.steps_to_update(storage), marks, owner, passengers)

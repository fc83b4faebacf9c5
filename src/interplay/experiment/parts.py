"""The parts every run is built from, in one order: env copies, policies, learners, actors.

A local run builds them once; each Ray env runner builds its own the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from interplay.algos.policy_algorithms import PolicyAlgorithms
from interplay.backends.ray.runners import RunnerParts
from interplay.config.schema import Config
from interplay.envs.batch import VecEnv
from interplay.experiment.build import (
    env_state_space,
    make_actors,
    make_algorithms,
    make_callbacks,
    make_specs,
    make_vec_env,
)
from interplay.experiment.policies import frozen_actor
from interplay.run.actors import Actor
from interplay.run.callbacks import CallbackList, Callbacks
from interplay.run.mapping import PolicySpec
from interplay.run.runner import Runner
from interplay.seeding import seed_everything


@dataclass
class Parts:
    env: VecEnv
    copies: Sequence[Any] | None  # the PettingZoo copies behind ``env`` (None if native)
    specs: dict[str, PolicySpec]
    algo: PolicyAlgorithms
    actors: dict[str, Actor]


def build_parts(cfg: Config, device: str, num_envs: int | None = None) -> Parts:
    """Seed the global generators from ``cfg.train.seed``, then build the env copies
    (``num_envs`` of them, default ``env.num_envs``), the policies, their learners on
    ``device`` and what acts for each; the env is closed if a later part fails."""
    seed_everything(cfg.train.seed)
    env, copies = make_vec_env(cfg, num_envs=num_envs, training=True)
    try:
        specs = make_specs(cfg, env)
        algo = make_algorithms(cfg, specs, device, env.turn_based, env_state_space(env))
        actors = make_actors(cfg, specs, algo, frozen_actor)
    except BaseException:
        env.close()
        raise
    return Parts(env, copies, specs, algo, actors)


def make_runner(cfg: Config, parts: Parts, collect: Collection[str],
                callbacks: CallbackList) -> Runner:
    """The runner stepping ``parts``' env copies, collecting the transitions of ``collect``."""
    return Runner(parts.env, parts.specs, parts.actors, collect, callbacks, parts.copies,
                  complete_episodes=cfg.train.batch_mode == "complete_episodes")


def build_runner(cfg: Config, extra: Sequence[Callbacks], collect: Collection[str],
                 num_envs: int) -> RunnerParts:
    """A runner of its own on the CPU over ``num_envs`` copies, with the callbacks ``cfg`` and
    ``extra`` name: what each Ray env runner steps, built as a local run builds its parts."""
    built = build_parts(cfg, "cpu", num_envs)
    try:
        runner = make_runner(cfg, built, collect, make_callbacks(cfg, extra))
    except BaseException:
        built.env.close()
        raise
    return RunnerParts(runner, built.algo, built.actors)

"""The parts every run is built from, in one order: env copies, policies, learners, actors.

A local run builds them once; each Ray env runner builds its own the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from interplay.algos.learners import Learners
from interplay.config.schema import Config
from interplay.envs.batch import VecEnv
from interplay.experiment.build import (
    env_state_space,
    make_actors,
    make_learners,
    make_specs,
    make_vec_env,
)
from interplay.experiment.policies import frozen_actor
from interplay.run.actors import Actor
from interplay.run.mapping import PolicySpec
from interplay.seeding import seed_everything


@dataclass
class Parts:
    env: VecEnv
    copies: Sequence[Any] | None  # the PettingZoo copies behind ``env`` (None if native)
    specs: dict[str, PolicySpec]
    algo: Learners
    actors: dict[str, Actor]


def build_parts(cfg: Config, device: str, num_envs: int | None = None) -> Parts:
    """Seed the global generators from ``cfg.train.seed``, then build the env copies
    (``num_envs`` of them, default ``env.num_envs``), the policies, their learners on
    ``device`` and what acts for each; the env is closed if a later part fails."""
    seed_everything(cfg.train.seed)
    env, copies = make_vec_env(cfg, num_envs=num_envs)
    try:
        specs = make_specs(cfg, env)
        algo = make_learners(cfg, specs, device, env.turn_based, env_state_space(env))
        actors = make_actors(cfg, specs, algo, frozen_actor)
    except BaseException:
        env.close()
        raise
    return Parts(env, copies, specs, algo, actors)

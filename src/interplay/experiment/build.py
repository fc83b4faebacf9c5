"""Building an experiment's pieces from its config: env, policies, algorithm, actors."""

from __future__ import annotations

import random
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from interplay.algos import algorithm_class
from interplay.algos.base import Algorithm, rng_for
from interplay.config.schema import Config, ConfigError, validate_section
from interplay.envs.async_vec import AsyncVecEnv
from interplay.envs.batch import VecEnv
from interplay.envs.registry import env_factory, native_env_class
from interplay.envs.vector import SyncVecEnv
from interplay.run.actors import Actor, RandomActor, ScriptedActor
from interplay.run.callbacks import CallbackList, Callbacks
from interplay.run.mapping import PolicySpec, build_specs, load_callable


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device: cuda was asked for but torch sees no CUDA device")
    return device


def make_vec_env(cfg: Config, num_envs: int | None = None,
                 env_id: Any = None) -> tuple[VecEnv, list[Any] | None]:
    """The vector env for a config, and the PettingZoo copies behind it (None if native)."""
    env_id = cfg.env.id if env_id is None else env_id
    n = cfg.env.num_envs if num_envs is None else num_envs
    native = native_env_class(env_id)
    if native is not None:
        env = native(num_envs=n, max_steps=cfg.train.max_steps_per_episode, **cfg.env.kwargs)
        return env, None
    make = env_factory(env_id, cfg.env.kwargs, cfg.env.api)
    scripted = any(p.type == "scripted" for p in cfg.policies.values())  # reads raw obs
    if cfg.env.vectorization == "async":
        return AsyncVecEnv(
            make, n, cfg.train.max_steps_per_episode, num_workers=cfg.env.num_workers,
            step_timeout_s=cfg.env.step_timeout_s, max_restarts=cfg.env.max_restarts,
            max_failures=cfg.env.max_failures, raw_obs=scripted,
        ), None
    vec = SyncVecEnv(make, n, cfg.train.max_steps_per_episode, cfg.env.max_failures,
                     raw_obs=scripted)
    return vec, [c.env for c in vec.copies]


def make_specs(cfg: Config, env: VecEnv) -> dict[str, PolicySpec]:
    return build_specs(
        env.agents, env.observation_spaces, env.action_spaces, env.obs_views, env.action_views,
        cfg.policies, cfg.train.policy_mapping_fn, cfg.train.self_play,
    )


def make_algorithm(cfg: Config, specs: dict[str, PolicySpec], device: str) -> Algorithm:
    cls = algorithm_class(cfg.algo.name)
    settings = validate_section(cls.Settings, cfg.algo.model_dump(), "algo")
    for pid, spec in specs.items():
        if spec.trainable and spec.action_view.kind not in cls.action_kinds:
            raise ConfigError(
                f"algo.name: {cls.name} cannot train policy {pid!r}: its action space "
                f"{spec.action_space} is {spec.action_view.kind}; {cls.name} handles "
                f"{', '.join(sorted(cls.action_kinds))}"
            )
    return cls(settings, specs, device, cfg.train.seed)


def make_actors(cfg: Config, specs: dict[str, PolicySpec], algo: Algorithm) -> dict[str, Actor]:
    actors: dict[str, Actor] = {}
    for pid, spec in specs.items():
        kind = spec.config.type
        if kind == "trainable":
            actors[pid] = algo.actor(pid)
        elif kind == "random":
            actors[pid] = RandomActor(spec, rng_for(cfg.train.seed, "fixed-random", pid))
        else:
            fn = load_callable(spec.config.fn or "", f"policies.{pid}.fn")
            actors[pid] = ScriptedActor(spec, fn)
    return actors


def make_callbacks(cfg: Config, extra: list[Callbacks] = ()) -> CallbackList:
    """The config's ``train.callbacks``, then ``extra`` (given in code), as one list."""
    found: list[Callbacks] = []
    for path in cfg.train.callbacks:
        cls = load_callable(path, "train.callbacks")
        obj = cls()
        if not isinstance(obj, Callbacks):
            raise ConfigError(f"train.callbacks: {path!r} is not a subclass of interplay.Callbacks")
        found.append(obj)
    return CallbackList([*found, *extra])


def new_run_dir(cfg: Config) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    name = cfg.env.id if isinstance(cfg.env.id, str) else getattr(cfg.env.id, "__name__", "env")
    base = Path(cfg.log.dir) / f"{stamp}-{name.replace(':', '-').split('.')[-1]}-{cfg.algo.name}"
    path, i = base, 1
    while True:  # made here, so that two runs started at once never pick the same folder
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            path, i = Path(f"{base}-{i}"), i + 1

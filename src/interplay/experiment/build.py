"""Building an experiment's pieces from its config: env, policies, algorithm, actors."""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import time
import tracemalloc
import warnings
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from interplay.algos import algorithm_class
from interplay.algos.actor_critic import CentralCritics
from interplay.algos.base import REGISTRY, Algorithm
from interplay.algos.policy_algorithms import PolicyAlgorithms
from interplay.config.code import names_code
from interplay.config.distributions import first, varied
from interplay.config.model import check_models
from interplay.config.schema import Config
from interplay.config.validation import policy_settings, validate_section
from interplay.data.ram import check_fits, human
from interplay.envs.async_vec import AsyncVecEnv
from interplay.envs.batch import VecEnv
from interplay.envs.openings import opening_maker
from interplay.envs.registry import env_factory, make_native, native_env_class
from interplay.envs.variation import varied_factory
from interplay.envs.vector import SyncVecEnv
from interplay.errors import ConfigError
from interplay.run.actors import Actor, RandomActor, ScriptedActor
from interplay.run.callbacks import CallbackList, Callbacks
from interplay.run.mapping import PolicySpec, build_specs, load_callable, with_preprocessing
from interplay.seeding import rng_for


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device: cuda was asked for but torch sees no CUDA device")
    return device


def reads_env_obs(policy_types: Sequence[str], league_fixed: Sequence[str],
                  teacher: str | None = None) -> bool:
    """Whether the env copies must keep the env's own observations: scripted policies,
    scripted league members and a learner's teacher (``algo.teacher``) read them."""
    return ("scripted" in policy_types or any(names_code(entry) for entry in league_fixed)
            or teacher is not None)


def make_vec_env(cfg: Config, num_envs: int | None = None, env_id: Any = None,
                 keep_state: bool = True, training: bool = False
                 ) -> tuple[VecEnv, Sequence[Any] | None]:
    """The vector env for a config, and the PettingZoo copies behind it (None if native).

    It keeps the env's global state when a learner mixes on it (QMIX's ``algo.state``) and
    ``keep_state`` (an env that only plays, for tests or evaluation, needs none). Only
    ``training`` copies open their episodes with ``env.opening`` random moves."""
    env_id = cfg.env.id if env_id is None else env_id
    n = cfg.env.num_envs if num_envs is None else num_envs
    state, where = state_wanted(cfg) if keep_state else (None, "")
    native = native_env_class(env_id)
    opening = cfg.env.opening if training else 0
    if native is not None and opening:
        raise ConfigError(f"env.opening: env {env_name(env_id)!r} is one of the built-in "
                          "batched envs; random openings are for turn-based PettingZoo games")
    if native is not None and (varied(cfg.env.kwargs) or cfg.env.reset_options):
        raise ConfigError(f"env.reset_options, or a distribution in env.kwargs: env "
                          f"{env_name(env_id)!r} is one of the built-in batched envs, whose "
                          "copies are one array and take no options per episode; use a "
                          "PettingZoo env")
    if native is not None:
        def build(copies: int) -> Any:
            return make_native(native, copies, cfg.train.max_steps_per_episode,
                               resolve_device(cfg.train.device), cfg.env.kwargs)

        if n >= PROBE_FROM:
            check_copies_fit(n, native_copy_bytes(build), env_name(env_id))
        env = build(n)
        if state == "env":  # the built-in batched envs have no state(): auto mixes observations
            env.close()
            raise _no_state(env_name(env_id), where, "it is one of the built-in batched envs, "
                            "whose state is their agents' observations joined (what "
                            "observations mixes on)")
        return env, None
    make = env_maker(env_id, cfg)
    if opening:
        make = opening_maker(make, opening, env_name(env_id))
    if n >= PROBE_FROM:
        started = time.perf_counter()
        check_copies_fit(n, copy_bytes(make), env_name(env_id))
        _say_when_slow(n, time.perf_counter() - started, env_name(env_id))
    scripted = reads_env_obs([p.type for p in cfg.policies.values()], cfg.league.fixed,
                             getattr(cfg.algo, "teacher", None))
    vec: SyncVecEnv | AsyncVecEnv
    if cfg.env.vectorization == "async":
        vec = AsyncVecEnv(
            make, n, cfg.train.max_steps_per_episode, num_workers=cfg.env.num_workers,
            step_timeout_s=cfg.env.step_timeout_s, max_restarts=cfg.env.max_restarts,
            max_failures=cfg.env.max_failures, raw_obs=scripted, state=state,
        )
    else:
        vec = SyncVecEnv(make, n, cfg.train.max_steps_per_episode, cfg.env.max_failures,
                         raw_obs=scripted, state=state)
    if state == "env" and vec.kept_state is None:
        vec.close()
        raise _no_state(env_name(env_id), where, "it declares no state_space (a gymnasium Box) "
                        "with a state() method")
    return vec, (CurrentEnvs(vec) if isinstance(vec, SyncVecEnv) else None)


PROBE_FROM = 64
"""Copies from which what they will take is measured on one or two before they are built."""


def check_copies_fit(n: int, per_copy: int | None, name: str) -> None:
    """Refuse ``n`` copies of ``per_copy`` bytes each when the memory free cannot hold them."""
    if per_copy:
        check_fits(n * per_copy, "env.num_envs",
                   f"{n:,} copies of env {name} ({human(per_copy)} each, measured on one)")


SLOW_BUILD_S = 30.0
"""Seconds of building env copies past which the run says so before it starts on them."""


def _say_when_slow(n: int, one_s: float, name: str) -> None:
    """Many copies of a slow env take minutes to build before anything is reported: say so."""
    if n * one_s > SLOW_BUILD_S:
        warnings.warn(f"env.num_envs: building {n:,} copies of env {name} may take about "
                      f"{n * one_s / 60:.0f} min ({one_s * 1e3:.1f} ms each, measured on one) "
                      "before training starts", stacklevel=3)


def native_copy_bytes(build: Callable[[int], Any]) -> int:
    """What one more copy of a built-in batched env takes: its arrays with two copies, less
    with one (what they share is counted once)."""
    one, two = build(1), build(2)
    try:
        return max(0, _array_bytes(two) - _array_bytes(one))
    finally:
        one.close()
        two.close()


def _array_bytes(env: Any) -> int:
    total = 0
    for value in vars(env).values():
        items = value.values() if isinstance(value, dict) else [value]
        total += sum(v.nbytes for v in items if isinstance(v, np.ndarray))
    return total


def copy_bytes(make: Callable[[], Any]) -> int | None:
    """What one PettingZoo copy takes, built and reset once under tracemalloc; None when the
    probe fails (building the copies names the env's error)."""
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    try:
        env = make()
        try:
            env.reset(seed=0)
            return max(0, tracemalloc.get_traced_memory()[0] - before)
        finally:
            env.close()
    except Exception:  # noqa: BLE001 - the copies themselves report what is wrong
        return None
    finally:
        if not tracing:
            tracemalloc.stop()


def env_maker(env_id: Any, cfg: Config, **extra: Any) -> Callable[[], Any]:
    """A factory of one env copy with ``env.kwargs`` (and ``extra``); with distributions in
    ``env.kwargs`` or ``env.reset_options``, copies that draw them per episode."""
    kwargs = {**cfg.env.kwargs, **extra}
    drawn = varied(kwargs)
    fixed = {k: v for k, v in kwargs.items() if k not in drawn}
    make = env_factory(env_id, {**fixed, **{k: first(v) for k, v in drawn.items()}}, cfg.env.api)
    if not drawn and not cfg.env.reset_options:
        return make
    api = cfg.env.api

    def make_with(values: dict[str, Any]) -> Any:
        return env_factory(env_id, {**fixed, **values}, api)()

    return varied_factory(make_with, cfg.env.reset_options, kwargs)


def state_wanted(cfg: Config) -> tuple[str | None, str]:
    """Whether a learner of this run mixes on the env's global state (QMIX's ``algo.state``):
    ``env`` (required), ``auto`` (where the env has one), or None; and the key that says so."""
    found: list[tuple[str, str]] = []
    settings = [(cfg.algo, "algo.state")]
    settings += [(policy_settings(cfg, pid), f"policies.{pid}.algo.state")
                 for pid, p in cfg.policies.items() if p.algo]
    for s, where in settings:
        mode = getattr(s, "state", None) if getattr(s, "uses_env_state", False) else None
        if mode in ("auto", "env"):
            found.append((mode, where))
    for mode in ("env", "auto"):
        for m, where in found:
            if m == mode:
                return m, where
    return None, "algo.state"


def env_state_space(env: Any) -> Any:
    """The space of the global state the vector env ``env`` keeps in ``VecStep.state`` (None
    if it keeps none: the built-in batched envs never do)."""
    return env.kept_state


def _no_state(name: str, where: str, why: str) -> ConfigError:
    return ConfigError(
        f"{where} is env (mix on the env's global state), but env {name!r} has none to give: "
        f"{why}; set {where}: auto (the env's state where it has one, else the agents' "
        "observations joined) or observations")


class CurrentEnvs(Sequence):
    """Each in-process copy's PettingZoo env as it is now: a copy rebuilt after its env
    raised is read as its new env, not the broken one."""

    def __init__(self, vec: SyncVecEnv):
        self._copies = vec.copies  # changed in place when a copy is rebuilt

    def __len__(self) -> int:
        return len(self._copies)

    def __getitem__(self, e: int) -> Any:  # type: ignore[override]
        return self._copies[e].env


def make_specs(cfg: Config, env: VecEnv) -> dict[str, PolicySpec]:
    specs = build_specs(
        env.agents, env.observation_spaces, env.action_spaces, env.obs_views, env.action_views,
        cfg.policies, cfg.train.policy_mapping_fn, cfg.train.self_play, cfg.train.seed,
        str(cfg.env.id),
    )
    return with_preprocessing(specs, cfg.algo)


def make_algorithm(cfg: Config, specs: dict[str, PolicySpec], device: str,
                   turn_based: bool = False, state_space: Any = None) -> Algorithm:
    """The configured algorithm, once it is known to handle these policies and this env
    (whose vector env keeps a global state of ``state_space``, if not None)."""
    cls = algorithm_class(cfg.algo.name)
    check_capabilities(cls, cfg, specs, turn_based)
    check_models(cfg)
    settings = cfg.algo
    if type(settings) is not cls.Settings:
        settings = validate_section(cls.Settings, settings.model_dump(), "algo")
    return cls(settings, specs, device, cfg.train.seed, **_env_state_arg(settings, state_space))


def _env_state_arg(settings: Any, state_space: Any) -> dict[str, Any]:
    """The env's state space, for the algorithms whose settings ask for it (QMIX's mixer)."""
    return {"state_space": state_space} if getattr(settings, "uses_env_state", False) else {}


def make_algorithms(cfg: Config, specs: dict[str, PolicySpec], device: str,
                    turn_based: bool = False, state_space: Any = None) -> PolicyAlgorithms:
    """Every trained policy's learner: one algorithm for the policies whose resolved settings
    (``algo`` and ``policies.<pid>.algo``) match, as one run without per-policy settings has,
    and ``train.policies_to_train`` set. What cannot share the run is refused here."""
    trained = [pid for pid, spec in specs.items() if spec.trainable]
    training = policies_to_train(cfg, trained)
    if not any(specs[pid].config.algo for pid in trained):
        return PolicyAlgorithms(
            [(make_algorithm(cfg, specs, device, turn_based, state_space), trained)], training)
    groups: dict[str, tuple[Any, list[str]]] = {}
    for pid in trained:
        settings = policy_settings(cfg, pid)
        groups.setdefault(settings.model_dump_json(), (settings, []))[1].append(pid)
    # critics that take every learner agent's action
    central = [(s, pids) for s, pids in groups.values()
               if issubclass(algorithm_class(s.name), CentralCritics)]
    if len(groups) > 1 and len(central) > 1:
        (a, pa), (b, pb) = central[:2]
        raise ConfigError(
            f"policies.{pb[0]}.algo: policies {pa[0]!r} ({a.name}) and {pb[0]!r} ({b.name}) "
            "would each have a centralised critic of their own, and each critic needs the "
            "other's actions; give them the same algo settings (one learner) or another "
            "algorithm (ippo, say) on one side")
    parts = []
    for settings, pids in groups.values():
        cls = algorithm_class(settings.name)
        where = (f"policies.{pids[0]}.algo.name" if specs[pids[0]].config.algo.get("name")
                 else "algo.name")
        own = {pid: spec if pid in pids else _untrained(spec) for pid, spec in specs.items()}
        try:
            check_capabilities(cls, cfg, own, turn_based)
        except ConfigError as err:
            raise ConfigError(f"{where}: policies {pids}: " + str(err).removeprefix("algo.name: ")) from None
        if type(settings) is not cls.Settings:
            settings = validate_section(cls.Settings, settings.model_dump(), where[:-5])
        parts.append((cls(settings, own, device, cfg.train.seed,
                          **_env_state_arg(settings, state_space)), pids))
    return PolicyAlgorithms(parts, training)


def _untrained(spec: PolicySpec) -> PolicySpec:
    """``spec`` as another learner's algorithm sees it: a policy it does not train."""
    return dataclasses.replace(spec, config=spec.config.model_copy(update={"type": "random"}))


def policies_to_train(cfg: Config, trained: list[str]) -> list[str]:
    """The trained policies ``train.policies_to_train`` names (ids or globs); all by default."""
    patterns = cfg.train.policies_to_train
    if patterns is None:
        return list(trained)
    chosen: list[str] = []
    for pattern in patterns:
        hits = [pid for pid in trained if fnmatch.fnmatchcase(pid, pattern)]
        if not hits:
            near = difflib.get_close_matches(pattern, trained, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ConfigError(f"train.policies_to_train: {pattern!r} names no trained policy"
                              f"{hint} (trained policies: {', '.join(trained)})")
        chosen += [pid for pid in hits if pid not in chosen]
    return chosen


def check_capabilities(cls: type[Algorithm], cfg: Config, specs: dict[str, PolicySpec],
                       turn_based: bool) -> None:
    """Refuse, before any work, what the algorithm declares it cannot learn from."""
    trained = [pid for pid, spec in specs.items() if spec.trainable]
    if turn_based and trained and not cls.turn_based:
        raise ConfigError(
            f"algo.name: {cls.name} cannot learn from env {env_name(cfg.env.id)!r}: it is "
            f"turn-based (one agent moves per step) and {cls.name} needs every trained agent "
            "to act in every step; use ippo, mappo or dqn, or the env's parallel API "
            "(env.api: parallel) if it has one")
    for pid in trained:
        spec = specs[pid]
        kind = spec.action_view.kind
        if kind not in cls.action_kinds:
            able = sorted(name for name, other in REGISTRY.items()
                          if kind in other.action_kinds and name != "random")
            raise ConfigError(
                f"algo.name: {cls.name} cannot train policy {pid!r} (agents "
                f"{', '.join(map(repr, spec.agents))}): its action space {spec.action_space} is "
                f"{kind}; {cls.name} handles {', '.join(sorted(cls.action_kinds))}"
                + (f"; algorithms that can: {', '.join(able)}" if able else "")
            )


def make_actors(cfg: Config, specs: dict[str, PolicySpec], algo: Algorithm,
                frozen: Any = None) -> dict[str, Actor]:
    """Each policy's actor; ``frozen(spec, source, key)`` loads a ``type: frozen`` one."""
    actors: dict[str, Actor] = {}
    for pid, spec in specs.items():
        kind = spec.config.type
        if kind == "trainable":
            actors[pid] = algo.actor(pid)
        elif kind == "random":
            actors[pid] = RandomActor(spec, rng_for(cfg.train.seed, "fixed-random", pid))
        elif kind == "frozen":
            if frozen is None:
                raise ConfigError(f"policies.{pid}: frozen policies are loaded by a run "
                                  "(interplay train), not here")
            actors[pid] = frozen(spec, spec.config.source or "", f"policies.{pid}.from")
        else:
            fn = load_callable(spec.config.fn or "", f"policies.{pid}.fn")
            actors[pid] = ScriptedActor(spec, fn)
    return actors


def make_callbacks(cfg: Config, extra: Sequence[Callbacks] = ()) -> CallbackList:
    """The config's ``train.callbacks``, then ``extra`` (given in code), as one list."""
    found: list[Callbacks] = []
    for path in cfg.train.callbacks:
        cls = load_callable(path, "train.callbacks")
        obj = cls()
        if not isinstance(obj, Callbacks):
            raise ConfigError(f"train.callbacks: {path!r} is not a subclass of interplay.Callbacks")
        found.append(obj)
    return CallbackList([*found, *extra])


def env_name(env_id: Any) -> str:
    return env_id if isinstance(env_id, str) else getattr(env_id, "__name__", "env")


REPORT_METRICS = ("env_steps", "agent_steps", "episodes", "episodes_in_report", "wall_s",
                  "env_steps_per_s", "episode_return_mean", "episode_return_min",
                  "episode_return_max", "episode_len_mean")
"""The numbers every test-phase row holds, besides the per-agent and per-policy returns."""
CUSTOM_METRICS = "custom/"
"""Callback metrics named under this prefix may be a ``train.target_metric`` undeclared."""


def check_target_metric(cfg: Config, specs: dict[str, PolicySpec], agents: list[str],
                        callbacks: CallbackList) -> None:
    """Refuse a ``train.target_metric`` that no test phase of this run can report."""
    check_test_metric(cfg.train.target_metric, "train.target_metric", specs, agents, callbacks)


def check_test_metric(name: str, key: str, specs: dict[str, PolicySpec], agents: list[str],
                      callbacks: CallbackList) -> None:
    """Refuse a metric (the setting ``key`` names it) that no test phase of this run can
    report."""
    if name.startswith(CUSTOM_METRICS):
        return
    known = [*REPORT_METRICS]
    for stat in ("mean", "min", "max"):
        known += [f"agent_return_{stat}/{a}" for a in agents]
        known += [f"policy_return_{stat}/{p}" for p in specs]
    declared = callbacks.metrics
    if name in known or any(name == d or (d.endswith("/") and name.startswith(d))
                            for d in declared):
        return
    near = difflib.get_close_matches(name, [*known, *declared], n=3, cutoff=0.4)
    hint = f"did you mean {' or '.join(map(repr, near))}? " if near else ""
    raise ConfigError(
        f"{key} {name!r} is not a metric test phases of this run report; {hint}"
        f"They report {', '.join(REPORT_METRICS)}, agent_return_mean/<agent> for agents "
        f"{', '.join(agents)}, policy_return_mean/<policy> for policies {', '.join(specs)} "
        f"(and _min, _max), and custom metrics from callbacks: those named under "
        f"{CUSTOM_METRICS!r} or listed in a callback's `metrics`"
        + (f" (declared: {', '.join(declared)})" if declared else "")
    )


def new_run_dir(cfg: Config) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    name = env_name(cfg.env.id)
    base = Path(cfg.log.dir) / f"{stamp}-{name.replace(':', '-').split('.')[-1]}-{cfg.algo.name}"
    path, i = base, 1
    while True:  # made here, so that two runs started at once never pick the same folder
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            path, i = Path(f"{base}-{i}"), i + 1

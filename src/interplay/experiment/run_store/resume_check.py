"""Whether a checkpoint fits the experiment about to load it, decided before any step is taken.

Each checkpoint records what wrote it (:func:`run_record`): the algorithm, its resolved
settings, which agents each policy controls, the resolved config and the interplay version.
Loading compares that record with the experiment built from the config now in force:

* another algorithm, another policy mapping, or networks whose tensors no longer fit (a
  changed hidden size, ``share_params``, observation normalisation...) are refused, naming
  the config keys that changed since the checkpoint with their old and new values;
* a changed number of env copies, env, or a vector env whose copies a checkpoint cannot hold
  (``env.vectorization: async``) are accepted: the learner, counters and RNGs continue, the
  env copies start fresh episodes, and :func:`check_loadable` returns why, for a warning.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from interplay.config.loading import read
from interplay.config.schema import Config
from interplay.config.validation import algo_name, validate
from interplay.errors import ConfigError
from interplay.experiment.build import reads_env_obs
from interplay.experiment.run_store.checkpoint import (
    CheckpointError,
    latest_valid,
    load_checkpoint,
    resolve_checkpoint,
)
from interplay.experiment.run_store.trust import require_trust

# Settings a resumed run may change freely: they shape no saved tensor and no env copy.
FREE = ("train.steps", "train.seed", "train.device", "train.torch_threads", "train.test_frequency",
        "train.test_episodes", "train.target", "train.target_metric", "train.callbacks",
        "train.batch_mode", "log.", "checkpoint.", "env.num_workers", "env.step_timeout_s",
        "env.max_failures", "env.max_restarts", "env.eval_id", "backend.")
# Settings whose change means the saved env copies cannot be put back: fresh episodes.
FRESH = ("env.num_envs", "env.vectorization", "env.id", "env.kwargs", "env.api",
         "train.max_steps_per_episode")

# Network settings that change what saved weights compute while keeping their shapes.
SAME_SHAPE_NET_KEYS = ("activation", "type", "kwargs", "layout")


class CheckpointMismatchError(ConfigError):
    """The checkpoint was written by another algorithm or for networks of other shapes."""


def interplay_version() -> str:
    try:
        return importlib.metadata.version("interplay")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def spaces_of(specs: dict) -> dict[str, list[str]]:
    return {a: [str(s.obs_space), str(s.action_space)] for s in specs.values() for a in s.agents}


def check_spaces(trained: dict[str, list[str]], specs: dict, what: str = "this env") -> None:
    """Policies trained on one env can act on another only if every agent's spaces match.

    ``trained``: the spaces the policies were made for (:func:`spaces_of`); ``specs``: those
    of the env they are to act on, which ``what`` names.
    """
    now = spaces_of(specs)
    if set(trained) != set(now):
        raise ConfigError(f"{what} has agents {sorted(now)}, but the policies were made for {sorted(trained)}")
    for agent, (obs, act) in trained.items():
        if now[agent] != [obs, act]:
            raise ConfigError(
                f"{what}: agent {agent!r} has observation space {now[agent][0]} and action space "
                f"{now[agent][1]}, but the policies were made for {obs} and {act}"
            )


def run_record(cfg: Config, algo: Any, specs: dict) -> dict[str, Any]:
    """What a checkpoint records about the run that wrote it."""
    return {
        "algorithm": cfg.algo.name,
        "settings": plain(algo.settings.model_dump()),
        "policies": {pid: list(s.agents) for pid, s in specs.items()},
        "interplay": interplay_version(),
        "config": plain(cfg.model_dump()),
    }


def check_loadable(state: dict[str, Any], exp: Any, source: str = "the checkpoint") -> list[str]:
    """Refuse a checkpoint that cannot be loaded into ``exp`` (a built Experiment), naming why.

    Returns the reasons, if any, why the env copies cannot be restored (fresh episodes then).
    """
    check_algorithm(state, exp.cfg.algo.name, source)
    record = state.get("run")
    changes = config_changes(record, exp.cfg, exp.algo) if record else {}
    suspects = {k: v for k, v in changes.items() if not k.startswith(FREE)}
    try:
        check_spaces(state["spaces"], exp.specs)
    except ConfigError as err:
        raise CheckpointMismatchError(f"{source}: {err}{_listed(suspects)}") from None
    mapping = {pid: list(s.agents) for pid, s in exp.specs.items()}
    if record and record["policies"] != mapping:
        raise CheckpointMismatchError(
            f"{source} holds policies {record['policies']} (policy id: agents), this config maps "
            f"{mapping}{_listed(suspects)}")
    fresh = {"algo": exp.algo.state_dict(),
             "actors": {p: a.state_dict() for p, a in exp.actors.items() if hasattr(a, "state_dict")}}
    misfits = tensor_misfits(fresh, {"algo": state["algo"], "actors": state["actors"]})
    if misfits:
        shown = "; ".join(misfits[:3]) + (f"; and {len(misfits) - 3} more" if len(misfits) > 3 else "")
        cause = (_listed(suspects) if suspects else
                 f" (no setting changed: the checkpoint was written by interplay "
                 f"{record['interplay']})" if record else "")
        raise CheckpointMismatchError(
            f"{source}: the saved networks do not fit the ones this config builds{cause}. "
            f"Saved vs now: {shown}")
    rewired = {k: v for k, v in changes.items()
               if k.startswith("algo.") and k.rsplit(".", 1)[-1] in SAME_SHAPE_NET_KEYS}
    if rewired:
        raise CheckpointMismatchError(
            f"{source}: the saved networks fit, but this config computes them differently"
            f"{_listed(rewired)}")
    return fresh_reasons(state, exp, changes)


def check_algorithm(state: dict[str, Any], name: str, source: str = "the checkpoint") -> None:
    """Refuse a checkpoint written by another algorithm than ``name``."""
    record = state.get("run")
    if record and record["algorithm"] != name:
        raise CheckpointMismatchError(
            f"{source} was written by {record['algorithm']} (interplay {record['interplay']}), "
            f"the config asks for {name} (algo.name); resume or evaluate it with "
            f"-s algo.name={record['algorithm']}, or start a new run")


def load_failure(state: dict[str, Any], exp: Any, source: str,
                 err: BaseException) -> CheckpointMismatchError:
    """The error for a checkpoint that passed :func:`check_loadable` but still would not load."""
    record = state.get("run")
    changes = config_changes(record, exp.cfg, exp.algo) if record else {}
    suspects = {k: v for k, v in changes.items() if not k.startswith(FREE)}
    return CheckpointMismatchError(
        f"{source} cannot be loaded into the run this config builds ({type(err).__name__}: "
        f"{err}){_listed(suspects)}")


def fresh_reasons(state: dict[str, Any], exp: Any, changes: dict[str, tuple[Any, Any]]) -> list[str]:
    """Why the env copies of the checkpoint cannot be put back, if they cannot."""
    reasons = [f"{k} changed from {old!r} to {new!r}" for k, (old, new) in changes.items()
               if k.startswith(FRESH)]
    if _reads_env_obs_now(state, exp.cfg):
        reasons.append("a scripted player (league.fixed, policies or algo.teacher) now reads the "
                       "env's own observations, which the checkpoint's env copies did not keep")
    if not exp.env.snapshot_supported:
        reasons.append(getattr(exp.env, "no_snapshot_reason",
                               "env.vectorization is async: the env copies live in worker "
                               "processes, whose state a checkpoint cannot hold"))
    if state["runner"].get("lost"):
        reasons.append(f"the run stopped when its env runners were lost ({state['runner']['lost']}), "
                       "so the checkpoint holds no episodes under way")
    saved_copies = len(state["runner"]["tracker"]["ids"])
    # Copies per runner: one local runner, or backend.num_env_runners Ray env runners.
    saved_layout = state["runner"].get("layout", [saved_copies])
    layout = getattr(exp.runner, "layout", [exp.env.num_envs])
    if (state["env"] is None and len(saved_layout) == 1 and not reasons
            and exp.env.snapshot_supported):
        reasons.append("the checkpoint holds no env copies (they ran in worker processes)")
    if saved_copies != exp.env.num_envs and not any(k == "env.num_envs" for k in changes):
        reasons.append(f"env.num_envs changed from {saved_copies} to {exp.env.num_envs}")
    elif saved_layout != layout:
        reasons.append(f"the env copies ran as {_runners(saved_layout)} and now run as "
                       f"{_runners(layout)} (backend.name, backend.num_env_runners, "
                       "backend.envs_per_runner)")
    return reasons


def _reads_env_obs_now(state: dict[str, Any], cfg: Config) -> bool:
    """Whether ``cfg`` has a scripted player where the run that wrote ``state`` had none."""
    record = state.get("run")
    if record is None or not reads_env_obs([p.type for p in cfg.policies.values()],
                                           cfg.league.fixed, getattr(cfg.algo, "teacher", None)):
        return False
    old = record["config"]
    return not reads_env_obs([p.get("type", "") for p in old.get("policies", {}).values()],
                             old.get("league", {}).get("fixed", []),
                             old.get("algo", {}).get("teacher"))


def _runners(layout: list[int]) -> str:
    return (f"one runner of {layout[0]}" if len(layout) == 1
            else f"{len(layout)} runners of {layout[0]}")


def config_changes(record: dict[str, Any], cfg: Config, algo: Any) -> dict[str, tuple[Any, Any]]:
    """Dotted key -> (old, new) for every setting that differs from the checkpoint's (``UNSET``
    where one side lacks it); the algorithm's settings as it resolved them, defaults included."""
    old = {k: v for k, v in record["config"].items() if k != "algo"}
    new = {k: v for k, v in plain(cfg.model_dump()).items() if k != "algo"}
    old["algo"], new["algo"] = record["settings"], plain(algo.settings.model_dump())
    return dict(sorted(diff(old, new).items()))


class _Unset:
    def __repr__(self) -> str:
        return "(unset)"


UNSET: Any = _Unset()


def diff(old: Any, new: Any, prefix: str = "") -> dict[str, tuple[Any, Any]]:
    """Where two nested mappings differ, by dotted key; a key on one side only is one entry."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: dict[str, tuple[Any, Any]] = {}
        for k in [*old, *(k for k in new if k not in old)]:
            out.update(diff(old.get(k, UNSET), new.get(k, UNSET), f"{prefix}.{k}" if prefix else k))
        return out
    return {} if old == new else {prefix: (old, new)}


def tensor_misfits(fresh: Any, saved: Any, where: str = "") -> list[str]:
    """Where ``saved`` and ``fresh`` (a just-built state) differ in their tensors: one lacks a
    tensor the other holds, or holds it in another shape."""
    if isinstance(fresh, torch.Tensor):
        if not isinstance(saved, torch.Tensor):
            return [f"{where}: missing, now {list(fresh.shape)}"]
        if saved.shape != fresh.shape:
            return [f"{where}: {list(saved.shape)} -> {list(fresh.shape)}"]
        return []
    if (fresh is None) != (saved is None):
        return [f"{where}: {'nothing' if saved is None else 'present'} -> "
                f"{'nothing' if fresh is None else 'present'}"]
    if isinstance(fresh, dict):
        if not isinstance(saved, dict):
            return [f"{where}: not a mapping"] if _holds_tensors(fresh) else []
        out = []
        for k, v in fresh.items():
            here = f"{where}.{k}" if where else str(k)
            if k in saved:
                out += tensor_misfits(v, saved[k], here)
            elif v is not None and _holds_tensors(v):
                out.append(f"{here}: missing")
        if fresh:  # an empty mapping (an optimizer not yet stepped) says nothing of the saved
            out += [f"{where}.{k}: saved, not built now" if where else f"{k}: saved, not built now"
                    for k, v in saved.items() if k not in fresh and _holds_tensors(v)]
        return out
    if isinstance(fresh, list | tuple) and isinstance(saved, list | tuple):
        if len(fresh) != len(saved) and _holds_tensors(fresh):
            return [f"{where}: {len(saved)} entries -> {len(fresh)}"]
        return [m for i, (f, s) in enumerate(zip(fresh, saved, strict=False))
                for m in tensor_misfits(f, s, f"{where}[{i}]")]
    return []


def _holds_tensors(obj: Any) -> bool:
    if isinstance(obj, torch.Tensor):
        return True
    if isinstance(obj, dict):
        return any(_holds_tensors(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return any(_holds_tensors(v) for v in obj)
    return False


def _listed(changes: dict[str, tuple[Any, Any]]) -> str:
    if not changes:
        return ""
    said = "; ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in changes.items())
    return f". Changed since the checkpoint: {said}; resume with the checkpoint's values"


def plain(value: Any) -> Any:
    """``value`` as JSON-like data; callables and classes by their ``module:name``."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '?')}:{value.__qualname__}"
    return repr(value)


def run_config(run_dir: Path, overrides: Sequence[str], trust: bool = True,
               command: str = "load_policy") -> Config:
    """A run folder's config, with ``overrides``; ``trust=False`` refuses one that names code
    (see :mod:`interplay.experiment.run_store.trust`) before anything is imported."""
    return validate(_run_data(run_dir, overrides, trust, command))


def _run_data(run_dir: Path, overrides: Sequence[str], trust: bool, command: str) -> dict[str, Any]:
    config = run_dir / "config.yaml"
    if not config.is_file():
        raise ConfigError(f"{run_dir} is not a run folder: it has no config.yaml")
    data = read([config], overrides)
    require_trust(config, data, overrides, trust, command)
    return data


def open_run(run_dir: Path, overrides: Sequence[str], checkpoint: str | Path | None,
             trust: bool = True, command: str = "resume") -> tuple[Config, dict[str, Any], Path]:
    """A run folder's config (with ``overrides``) and the state of its newest valid checkpoint;
    ``trust=False`` refuses a config that names code before anything is imported."""
    data = _run_data(run_dir, overrides, trust, command)
    found = resolve_checkpoint(Path(checkpoint)) if checkpoint is not None else latest_valid(run_dir)
    if found is None:
        raise CheckpointError(f"{run_dir} has no valid checkpoint")
    path = found
    state, _ = load_checkpoint(path)
    # Before the settings are checked: another algorithm's settings are not worth listing.
    check_algorithm(state, algo_name(data), f"checkpoint {path}")
    return validate(data), state, path

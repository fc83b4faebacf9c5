"""The experiment config: one typed model per section, each field's doc next to its default.

YAML files merge in order, ``-s dotted.key=value`` overrides go last, and everything is
validated before any work starts. Errors name the dotted key, the bad value and, for unknown
keys, the nearest valid one.
"""

from __future__ import annotations

import difflib
import io
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from interplay.errors import UserError


class ConfigError(UserError, ValueError):
    """A config problem, already phrased for the user."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True,
                              use_attribute_docstrings=True)


class EnvConfig(Section):
    id: Any = "spread"
    """A built-in or registered env name, a module path (``mpe2.simple_spread_v3``) whose
    ``parallel_env()``/``env()`` builds the env, ``module:function``, or a factory."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the env's constructor."""
    api: Literal["auto", "aec", "parallel"] = "auto"
    """Which PettingZoo API to build a module path with; auto prefers ``parallel_env``."""
    num_envs: int = Field(1, ge=1)
    """Env copies stepped together; each policy acts once per step for all of them."""
    vectorization: Literal["sync", "async"] = "sync"
    """How PettingZoo copies are stepped: ``sync`` (in this process) or ``async`` (in workers)."""
    num_workers: int | None = Field(None, ge=1)
    """Worker processes for ``async``; none means one per CPU core, at most one per copy."""
    step_timeout_s: float = Field(60.0, gt=0)
    """Seconds an ``async`` worker may take over a step or reset before it is deemed hung."""
    max_failures: int = Field(3, ge=1)
    """Times one env copy may raise (rebuilt, episode dropped) with no episode finished in
    between before the run stops with the env's error."""
    max_restarts: int = Field(10, ge=0)
    """Dead or hung ``async`` workers that may be replaced in a run; 0 stops at the first."""
    eval_id: Any = None
    """The env test phases run on (same spaces); none = the training env."""


class AlgoConfig(Section):
    model_config = ConfigDict(extra="allow", validate_assignment=True)
    name: str = "random"
    """The algorithm; its own settings sit beside ``name`` and are checked by it."""


class PolicyConfig(Section):
    agents: list[str] | None = None
    """Agent ids or glob patterns (``agent_*``) this policy controls; none means the
    default group of the same name (ids sharing the prefix before the last ``_``)."""
    type: Literal["trainable", "random", "scripted"] = "trainable"
    """``trainable`` (learned by the algorithm), ``random`` (legal actions, uniformly) or
    ``scripted`` (``fn`` acts)."""
    fn: str | None = None
    """For scripted policies: ``module:function``, called as ``fn(observation, agent_id)``
    with the env's own observation."""
    stack_size: int = Field(1, ge=1)
    """Frames stacked per agent in what this policy sees."""

    @model_validator(mode="after")
    def _scripted_needs_fn(self) -> PolicyConfig:
        if self.type == "scripted" and not self.fn:
            raise ValueError("a scripted policy needs fn: module:function")
        if self.fn and self.type != "scripted":
            raise ValueError(f"fn is only used by scripted policies, not type {self.type!r}")
        return self


class TrainConfig(Section):
    steps: int = Field(50_000, ge=-1)
    """Env steps to train for (one env step is one call of a copy's step); -1 = no limit."""
    seed: int = Field(0, ge=0, lt=2**31)
    """The one seed every RNG (python, numpy, torch, env copies) is derived from; 0 to
    2147483647 (2^31 - 1), as the seeds derived for env copies must be."""
    max_steps_per_episode: int | None = Field(None, ge=1)
    """Cut episodes after this many env steps, as truncation (not termination)."""
    batch_mode: Literal["complete_episodes", "truncate_episodes"] = "complete_episodes"
    """``complete_episodes``: the learner gets a copy's transitions when its episode ends, so an
    episode dropped because its env raised never reaches it; ``truncate_episodes``: each
    transition as soon as it closes (sooner on long episodes, but a dropped episode's earlier
    transitions may already have been learned from)."""
    self_play: bool = False
    """One policy on every seat."""
    policy_mapping_fn: str | None = None
    """``module:function`` mapping an agent id to a policy id (for agents not listed in
    ``policies``)."""
    callbacks: list[str] = Field(default_factory=list)
    """Callback classes as ``module:Class``."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where networks and learner batches live."""
    torch_threads: int = Field(1, ge=0)
    """CPU threads torch may use; small networks run fastest on one, 0 leaves torch's default."""
    test_frequency: int = Field(-1, ge=-1)
    """Env steps between test phases (greedy policies on a separate eval env); -1 = none."""
    test_episodes: int = Field(10, ge=1)
    """Episodes per test phase."""
    target: float | None = None
    """Stop early once a test phase's ``target_metric`` reaches this value."""
    target_metric: str = "episode_return_mean"
    """The test metric ``target`` is compared with (any metrics.jsonl name)."""

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        if self.steps == 0:
            raise ValueError("steps must be positive, or -1 for no limit")
        if self.test_frequency == 0:
            raise ValueError("test_frequency must be positive, or -1 for no test phases")
        if self.target is not None and self.test_frequency < 0:
            raise ValueError("target is checked in test phases: set test_frequency too")
        return self


class LogConfig(Section):
    every: int = Field(2_000, ge=1)
    """Env steps between two ``metrics.jsonl`` reports."""
    dir: str = "runs"
    """Where run folders are made when no ``--run-dir`` is given."""
    console: bool = True
    """Show a live progress bar."""
    tensorboard: bool = True
    """Write TensorBoard event files into the run folder."""
    curve: bool = True
    """Draw ``curve.png`` at each checkpoint and at the end."""
    wandb: bool = False
    """Also log to Weights & Biases (needs the ``wandb`` extra)."""
    wandb_project: str = "interplay"
    """The W&B project."""
    wandb_mode: Literal["offline", "online"] = "offline"
    """``offline`` works without a network; sync later with ``wandb sync``."""


class CheckpointConfig(Section):
    every: int = Field(0, ge=0)
    """Env steps between checkpoints; 0 = only at the end."""
    keep: int = Field(3, ge=1)
    """How many of the newest checkpoints to keep."""
    at_end: bool = True
    """Write a checkpoint when training ends."""


class Config(Section):
    env: EnvConfig = Field(default_factory=EnvConfig)
    algo: AlgoConfig = Field(default_factory=AlgoConfig)
    policies: dict[str, PolicyConfig] = Field(default_factory=dict)
    train: TrainConfig = Field(default_factory=TrainConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)


SECTIONS: dict[str, type[Section]] = {
    "env": EnvConfig, "algo": AlgoConfig, "train": TrainConfig, "log": LogConfig,
    "checkpoint": CheckpointConfig,
}


class _Loader(yaml.SafeLoader):
    """YAML's safe loader, reading ``3e-4`` and ``2e6`` as numbers (YAML 1.2) as people expect."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d[\d_]*)?(?:\.\d*)?[eE][-+]?\d+$"),
    list("-+0123456789."),
)


def _safe_load(text: str, where: str) -> Any:
    try:
        return yaml.load(io.StringIO(text), Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        raise ConfigError(f"{where}: not valid YAML (or uses a tag that is not allowed): {err}") from err


def read_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    data = _safe_load(p.read_text(), str(p))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of sections, got {type(data).__name__}")
    return data


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``extra`` into a copy of ``base``; mappings merge, everything else replaces."""
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {text!r}: expected dotted.key=value, e.g. train.steps=20000")
    value = _safe_load(raw, f"override {text!r}") if raw.strip() else ""
    return key.strip().split("."), value


def apply_override(data: dict[str, Any], text: str) -> dict[str, Any]:
    path, value = parse_override(text)
    nested: Any = value
    for part in reversed(path):
        nested = {part: nested}
    return merge(data, nested)


def load(files: list[str | Path] = (), overrides: list[str] = (),
         base: dict[str, Any] | None = None) -> Config:
    """Read, merge and validate a config: ``base``, then each file in order, then overrides."""
    data: dict[str, Any] = dict(base or {})
    for f in files:
        data = merge(data, read_yaml(f))
    for o in overrides:
        data = apply_override(data, o)
    return validate(data)


def validate(data: dict[str, Any]) -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(explain(err)) from None


def _nearest(key: str, options: list[str]) -> str | None:
    close = difflib.get_close_matches(key, options, n=1, cutoff=0.5)
    return close[0] if close else None


def _fields_at(path: tuple[Any, ...], root: type[BaseModel]) -> list[str]:
    if root is Config and path[:1] == ("policies",) and len(path) == 2:
        return list(PolicyConfig.model_fields)
    model: type[BaseModel] = root
    for part in path:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        sub = field.annotation if field is not None else None
        if not (isinstance(sub, type) and issubclass(sub, BaseModel)):
            return []
        model = sub
    return list(model.model_fields)


def validate_section(model: type[BaseModel], data: dict[str, Any], prefix: str) -> Any:
    """Validate one section (an algorithm's settings, say) with errors under ``prefix``."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ConfigError(explain(err, model, prefix)) from None


def explain(err: ValidationError, root: type[BaseModel] = Config, prefix: str = "") -> str:
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        dotted = ".".join(str(p) for p in (prefix, *loc) if p != "")
        if e["type"] == "extra_forbidden":
            options = _fields_at(loc[:-1], root)
            near = _nearest(str(loc[-1]), options)
            parent = ".".join(str(p) for p in (prefix, *loc[:-1]) if p != "")
            hint = f"; did you mean {parent + '.' if parent else ''}{near}?" if near else (
                f"; valid keys: {', '.join(options)}" if options else "")
            lines.append(f"{dotted}: unknown key{hint}")
        else:
            value = e.get("input")
            shown = "" if isinstance(value, dict) else f" (got {value!r})"
            lines.append(f"{dotted}: {e['msg']}{shown}")
    return "invalid config:\n  " + "\n  ".join(lines)


def to_yaml(cfg: Config) -> str:
    data = cfg.model_dump(mode="json")
    return yaml.safe_dump(data, sort_keys=False)


def describe(cfg: Config) -> str:
    """The resolved config as YAML, each setting followed by its doc."""
    lines: list[str] = []
    data = cfg.model_dump(mode="json")
    for section, values in data.items():
        lines.append(f"{section}:")
        model = SECTIONS.get(section)
        if not isinstance(values, dict) or not values:
            lines.append("  {}" if not values else f"  {values!r}")
            continue
        for key, value in values.items():
            text = yaml.safe_dump({key: value}, default_flow_style=True, width=10_000).strip()
            doc = ""
            if model is not None and key in model.model_fields:
                doc = " ".join((model.model_fields[key].description or "").split())
            lines.append(f"  {text[1:-1]}" + (f"  # {doc}" if doc else ""))
    return "\n".join(lines)

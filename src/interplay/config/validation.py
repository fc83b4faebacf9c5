"""Checking a raw config against the sections: errors name the dotted key, the bad value and,
for unknown keys, the nearest valid one."""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError

from interplay.config.algo import AlgoSettings, settings_class
from interplay.config.critic_model import refuse_attention
from interplay.config.model import ModelOverride, check_models, refuse_renamed
from interplay.config.schema import Config, PolicyConfig
from interplay.errors import ConfigError


def algo_name(data: dict[str, Any]) -> Any:
    """The algorithm a raw (not yet validated) config names."""
    algo = data.get("algo")
    return algo.get("name", "random") if isinstance(algo, dict) else "random"


def validate(data: dict[str, Any]) -> Config:
    algo = data.get("algo")
    if isinstance(algo, dict):  # its model depends on its name: checked first, on its own
        settings = settings_class(algo.get("name", "random"))
        refuse_renamed(algo, settings.model_fields)
        refuse_attention(algo.get("name", "random"), algo)
        validate_section(settings, algo, "algo")
    policies = data.get("policies")
    for pid, policy in (policies.items() if isinstance(policies, dict) else ()):
        if isinstance(policy, dict) and isinstance(policy.get("model"), dict):
            validate_section(ModelOverride, policy["model"], f"policies.{pid}.model")
    try:
        cfg = Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(explain(err)) from None
    check_models(cfg)
    for pid, policy in cfg.policies.items():
        if policy.algo:
            if policy.type != "trainable":
                raise ConfigError(f"policies.{pid}.algo: policy {pid!r} is {policy.type}; only "
                                  "trainable policies have algorithm settings")
            policy_settings(cfg, pid)
    return cfg


def policy_settings(cfg: Config, pid: str) -> AlgoSettings:
    """Policy ``pid``'s algorithm settings: ``policies.<pid>.algo`` over ``algo`` (or, when it
    names another algorithm, over that algorithm's defaults), validated as its own."""
    policy = cfg.policies.get(pid)
    override = policy.algo if policy is not None else {}
    if not override:
        return cfg.algo
    where = f"policies.{pid}.algo"
    name = override.get("name", cfg.algo.name)
    base = cfg.algo.model_dump() if name == cfg.algo.name else {}
    try:
        cls = settings_class(name)
    except ConfigError as err:
        raise ConfigError(str(err).replace("algo.name", f"{where}.name", 1)) from None
    refuse_renamed(override, cls.model_fields, where)
    refuse_attention(name, override, where)
    return validate_section(cls, _merged(base, override), where)


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = (_merged(out[key], value) if isinstance(value, dict)
                    and isinstance(out.get(key), dict) else value)
    return out


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
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"{dotted}: {msg}{shown}")
    return "invalid config:\n  " + "\n  ".join(lines)

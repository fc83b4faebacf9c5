"""A config as text: the YAML a run folder keeps, and the resolved config with each setting's
default and doc."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel

from interplay.config.schema import SECTIONS, Config
from interplay.config.validation import policy_settings


def to_yaml(cfg: Config) -> str:
    data = cfg.model_dump(mode="json", by_alias=True)
    return yaml.safe_dump(data, sort_keys=False)


def describe(cfg: Config) -> str:
    """The resolved config as YAML, each setting followed by its default and its doc."""
    lines: list[str] = []
    data = cfg.model_dump(mode="json", by_alias=True)
    for section, values in data.items():
        lines.append(f"{section}:")
        model = type(cfg.algo) if section == "algo" else SECTIONS.get(section)
        if not isinstance(values, dict) or not values:
            lines.append("  {}" if not values else f"  {values!r}")
            continue
        if section == "policies":
            _describe_policies(lines, cfg, values)
            continue
        _describe_fields(lines, model, values, "  ")
    return "\n".join(lines)


def _describe_policies(lines: list[str], cfg: Config, values: dict[str, Any]) -> None:
    """Each policy on one line; one with algorithm settings of its own shows them resolved
    (every setting its learner uses), one per line."""
    for pid, policy in values.items():
        if not policy.get("algo"):
            lines.append(f"  {_flow(pid, policy)}")
            continue
        settings = policy_settings(cfg, pid)
        rest = {k: v for k, v in policy.items() if k != "algo"}
        lines.append(f"  {pid}:")
        lines.extend(f"    {_flow(k, v)}" for k, v in rest.items())
        lines.append("    algo:  # resolved: this policy's learner's settings")
        _describe_fields(lines, type(settings), settings.model_dump(mode="json"), "      ")


def _describe_fields(lines: list[str], model: type[BaseModel] | None, values: dict[str, Any],
                     indent: str, defaults: dict[str, Any] | None = None) -> None:
    """One line per setting; a nested settings model (``algo.model``) gets one per field,
    with the defaults its parent gives it."""
    for key, value in values.items():
        field = model.model_fields.get(key) if model is not None else None
        sub = field.annotation if field is not None else None
        if (field is not None and isinstance(sub, type) and issubclass(sub, BaseModel)
                and isinstance(value, dict)):
            doc = " ".join((field.description or "").split())
            lines.append(f"{indent}{key}:" + (f"  # {doc}" if doc else ""))
            default = field.get_default(call_default_factory=True)
            _describe_fields(lines, sub, value, indent + "  ",
                             default.model_dump(mode="json") if isinstance(default, BaseModel)
                             else None)
        else:
            lines.append(f"{indent}{_flow(key, value)}"
                         + _comment(model, key, (defaults or {}).get(key, _UNSET)))


def _flow(key: str, value: Any) -> str:
    return yaml.safe_dump({key: value}, default_flow_style=True, width=10_000).strip()[1:-1]


_UNSET = object()


def _comment(model: type[BaseModel] | None, key: str, default: Any = _UNSET) -> str:
    field = model.model_fields.get(key) if model is not None else None
    if field is None:
        return ""
    doc = " ".join((field.description or "").split())
    if field.is_required():
        return f"  # {doc}" if doc else ""
    if default is _UNSET:
        default = field.get_default(call_default_factory=True)
    if isinstance(default, BaseModel):
        default = default.model_dump(mode="json")
    shown = yaml.safe_dump(default, default_flow_style=True, width=10_000).strip()
    shown = shown.removesuffix("\n...").removesuffix("...").strip()
    return f"  # {doc} (default: {shown})" if doc else f"  # (default: {shown})"

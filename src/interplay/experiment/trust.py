"""Which code a run folder's config would import and run, and the ``--trust`` it needs.

A config names code in ``env.id``, ``env.eval_id``, ``policies.*.fn``,
``train.policy_mapping_fn``, ``train.callbacks``, ``algo.name`` and the networks' ``type``
(``algo.model``, ``algo.critic_model``, ``policies.*.model``), as ``module:Class``.
``resume`` and ``eval`` of someone else's run folder would import those modules, so a folder is
as trusted as code. Modules of the env packages installed in this environment (and interplay's
own) pass; anything else, a local file or a module not installed, is listed and needs ``trust``.
"""

from __future__ import annotations

import importlib.util
import site
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from interplay.config.code import names_code
from interplay.config.schema import apply_override
from interplay.envs.registry import known_env_names
from interplay.errors import UserError

ENV_PACKAGES = ("pettingzoo", "mpe2", "sisl", "butterfly", "magent2", "shimmy")
"""Top-level packages of envs whose installed copies a run folder may name without ``--trust``."""


class TrustError(UserError, PermissionError):
    """A run folder whose config would import code that is not an installed env package."""


def named_code(data: dict[str, Any]) -> dict[str, list[str]]:
    """Module -> the config keys naming it, for every place a config (as plain data) names code."""
    found: dict[str, list[str]] = {}

    def add(key: str, value: Any, env: bool = False) -> None:
        if not isinstance(value, str) or not value:
            return
        if env and value in known_env_names():
            return
        module, sep, _ = value.partition(":")
        if not sep and not env:  # a registered algorithm or the like: no module
            return
        found.setdefault(module, []).append(f"{key} {value!r}")

    env = data.get("env") or {}
    add("env.id", env.get("id"), env=True)
    add("env.eval_id", env.get("eval_id"), env=True)
    for pid, policy in (data.get("policies") or {}).items():
        add(f"policies.{pid}.fn", (policy or {}).get("fn"))
    train = data.get("train") or {}
    add("train.policy_mapping_fn", train.get("policy_mapping_fn"))
    for i, path in enumerate(train.get("callbacks") or []):
        add(f"train.callbacks[{i}]", path)
    algo = data.get("algo") or {}
    add("algo.name", algo.get("name"))
    for field in ("model", "critic_model"):
        add(f"algo.{field}.type", _network(algo.get(field)))
    for pid, policy in (data.get("policies") or {}).items():
        add(f"policies.{pid}.model.type", _network((policy or {}).get("model")))
    for i, entry in enumerate((data.get("league") or {}).get("fixed") or []):
        if isinstance(entry, str) and names_code(entry):  # not random, not a run folder
            add(f"league.fixed[{i}]", entry)
    return found


def _network(model: Any) -> Any:
    """A ``model`` section's ``type`` when it names a module (``module:Class``)."""
    kind = model.get("type") if isinstance(model, dict) else None
    return kind if isinstance(kind, str) and ":" in kind else None


def _installed_env_package(module: str) -> bool:
    """Whether ``module`` lies in an installed copy of a known env package (or is interplay's)."""
    top = module.split(".")[0]
    if top == "interplay":
        return True
    if top not in ENV_PACKAGES:
        return False
    try:
        spec = importlib.util.find_spec(top)  # a top-level name: nothing is imported
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    where = spec.origin if spec.origin not in (None, "namespace") else next(
        iter(spec.submodule_search_locations or ()), None)
    if where is None:
        return False
    paths = sysconfig.get_paths()
    sites = {paths["purelib"], paths["platlib"], *site.getsitepackages()}
    path = Path(where).resolve()
    return any(path.is_relative_to(Path(s).resolve()) for s in sites)


def untrusted_code(data: dict[str, Any], overrides: Sequence[str] = ()) -> dict[str, list[str]]:
    """The modules ``data`` names that need trust: not installed env packages, and not named by
    the user's own ``overrides``."""
    given: dict[str, Any] = {}
    for text in overrides:
        given = apply_override(given, text)
    own = named_code(given)
    return {m: keys for m, keys in named_code(data).items()
            if m not in own and not _installed_env_package(m)}


def require_trust(run_dir: Path, data: dict[str, Any], overrides: list[str], trust: bool,
                  command: str) -> None:
    """Refuse, listing the modules, when the run folder's config names code and ``trust`` is off."""
    if trust:
        return
    modules = untrusted_code(data, overrides)
    if not modules:
        return
    listed = "\n  ".join(f"{m}  ({', '.join(keys)})" for m, keys in sorted(modules.items()))
    raise TrustError(
        f"{run_dir / 'config.yaml'} names code that `interplay {command}` would import and run:\n"
        f"  {listed}\n"
        "A run folder is as trusted as the code it names. Read those modules, then pass --trust "
        "to run them."
    )

"""Which code a config would import and run, and the ``--trust`` it needs.

The schema marks every field that can name code with :class:`~interplay.config.code.NamesCode`
(``env.id``, ``algo.name``, ``policies.*.fn``, networks' ``type``, ``league.fixed``...);
:func:`code_fields` lists them from the schema and :func:`code_refs` finds them in a config
read as plain data, before pydantic validates it (validating ``algo.name: module:Class``
imports the module). A field naming a run folder (``policies.*.from``, a ``league.fixed``
run) brings that run's own config in: its code is listed too, under the key that named it.

``resume``, ``eval``, ``hpo --resume`` and ``load_policy`` read a config nobody just gave
them, so a run folder is as trusted as the code it names. Modules of the env packages
installed in this environment (and interplay's own) pass; anything else, a local file or a
module not installed, is listed and needs ``trust``. So does a Ray cluster a stored config
would join: the config, the weights and the code are sent there.
"""

from __future__ import annotations

import importlib.util
import site
import sysconfig
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from interplay.config.algo import SETTINGS, AlgoSettings
from interplay.config.code import CodeKind, Holds, NamesCode, names_code
from interplay.config.loading import apply_override, read_yaml
from interplay.config.schema import Config
from interplay.envs.registry import family_modules, known_env_names, native_env_class
from interplay.errors import UserError

ENV_PACKAGES = ("pettingzoo", "mpe2", "sisl", "butterfly", "magent2", "shimmy", "rware",
                "lbforaging")
"""Top-level packages of envs whose installed copies a run folder may name without ``--trust``."""

LOOPBACK_HOSTS = ("127.0.0.1", "::1", "[::1]", "localhost")
"""Ray addresses on these hosts stay on this machine."""


class TrustError(UserError, PermissionError):
    """A config read from a run folder that would import code that is not an installed env
    package, or join a Ray cluster, and ``--trust`` was not given."""


@dataclass(frozen=True)
class CodeRef:
    """One value of a config field that may name code: ``key`` is its dotted place."""

    key: str
    value: str
    kind: CodeKind


# -- the fields, from the schema ------------------------------------------------------------

def code_fields() -> dict[str, CodeKind]:
    """Every config key that can name code (``policies.<pid>.fn``...), and how it is read."""
    return dict(_fields((Config,), ""))


def _fields(models: Sequence[type[BaseModel]], prefix: str) -> Iterator[tuple[str, CodeKind]]:
    if any(issubclass(m, AlgoSettings) for m in models):
        models = _algo_models(None)
    seen: set[str] = set()
    for model in models:
        for name, field in model.model_fields.items():
            key = f"{prefix}{field.alias or name}"
            if key in seen:
                continue
            seen.add(key)
            marker = _marker(field, NamesCode)
            if marker is not None:
                yield key, marker.kind
                continue
            for sub, sub_prefix in _nested(field, key):
                yield from _fields(sub, sub_prefix.replace("{}", "<pid>"))


def _marker(field: FieldInfo, kind: type[Any]) -> Any:
    return next((m for m in field.metadata if isinstance(m, kind)), None)


def _nested(field: FieldInfo, key: str) -> list[tuple[tuple[type[BaseModel], ...], str]]:
    """The settings models a field's value is read with, and the prefix of their keys
    (``{}`` standing for a mapping's key, a policy id)."""
    holds = _marker(field, Holds)
    if holds is not None:
        return [((holds.model(),), f"{key}.")]
    ann = field.annotation
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [((ann,), f"{key}.")]
    args = typing.get_args(ann)
    if typing.get_origin(ann) is dict and len(args) == 2 and isinstance(args[1], type) \
            and issubclass(args[1], BaseModel):
        return [((args[1],), f"{key}.{{}}.")]
    return []


def _algo_models(name: Any) -> tuple[type[BaseModel], ...]:
    """The settings models an ``algo`` section is read with: algorithm ``name``'s first when
    registered, then every registered one, so a key it lacks (which validation refuses later)
    or an algorithm of the user's own (not imported to learn its fields) is read too."""
    import interplay.algos  # noqa: F401 - registers the built-in algorithms' settings

    own = (SETTINGS[name],) if isinstance(name, str) and name in SETTINGS else ()
    return (*own, AlgoSettings, *SETTINGS.values())


# -- the values, in a config as plain data ---------------------------------------------------

def code_refs(data: Any) -> list[CodeRef]:
    """Every value in ``data`` (a config as plain data, not validated) that may name code."""
    return list(_refs((Config,), data, ""))


def _refs(models: Sequence[type[BaseModel]], data: Any, prefix: str) -> Iterator[CodeRef]:
    if not isinstance(data, dict):
        return
    if any(issubclass(m, AlgoSettings) for m in models):
        models = _algo_models(data.get("name", "random"))
    for key, value in data.items():
        field = _field(models, key)
        if field is None:
            continue
        where = f"{prefix}{key}"
        marker = _marker(field, NamesCode)
        if marker is not None:
            items = enumerate(value) if isinstance(value, list) else [(None, value)]
            for i, item in items:
                if isinstance(item, str) and item:
                    yield CodeRef(where if i is None else f"{where}[{i}]", item, marker.kind)
            continue
        for sub, sub_prefix in _nested(field, where):
            if "{}" not in sub_prefix:
                yield from _refs(sub, value, sub_prefix)
            elif isinstance(value, dict):
                for name, item in value.items():
                    yield from _refs(sub, item, sub_prefix.replace("{}", str(name)))


def _field(models: Sequence[type[BaseModel]], key: Any) -> FieldInfo | None:
    for model in models:
        for name, field in model.model_fields.items():
            if key in (name, field.alias):
                return field
    return None


def named_code(data: dict[str, Any]) -> dict[str, list[str]]:
    """Module (or Ray cluster) -> the config keys naming it, for every place ``data`` (a config
    as plain data) names code, the configs of the run folders it names included."""
    return _group(_named(code_refs(data), own=False, seen=set()))


def _named(refs: Sequence[CodeRef], own: bool, seen: set[Path],
           follow: bool = True) -> Iterator[tuple[str, str]]:
    """(module or cluster, where) for each ref; ``own`` refs are the user's (only the run
    folders they name are read); ``follow``: read the run folders named."""
    for ref in refs:
        shown = f"{ref.key} {ref.value!r}"
        kind = ref.kind
        if kind == "player":
            if ref.value == "random":
                continue
            kind = "attr" if names_code(ref.value) else "run"
        if kind == "run":
            if follow:
                yield from _in_run(ref.value, shown, seen)
        elif own:
            continue
        elif kind == "cluster":
            if not is_loopback(ref.value):
                yield f"the Ray cluster at {ref.value}", shown
        elif kind == "env":
            # a family's task (vmas:<scenario>, openspiel:<game>) names no module of its
            # own; a gymma id names the package that registers its env
            family = family_modules(ref.value)
            if family is not None:
                yield from ((module, shown) for module in family)
            elif ref.value not in known_env_names() and native_env_class(ref.value) is None:
                yield ref.value.partition(":")[0], shown
        elif ":" in ref.value:  # a plain name is a registered algorithm or network
            yield ref.value.partition(":")[0], shown


def _in_run(source: str, shown: str, seen: set[Path]) -> Iterator[tuple[str, str]]:
    """What the config of the run folder ``source`` names (once per folder)."""
    from interplay.experiment.run_store.run_folder import source_run_dir

    path = Path(source)
    if not path.exists() and ":" in source:
        path = Path(source.rpartition(":")[0])
    if not path.exists():
        return  # loading it fails later, naming the key
    run = source_run_dir(path)
    config = run / "config.yaml"
    if not config.is_file() or run.resolve() in seen:
        return
    seen.add(run.resolve())
    for module, where in _named(code_refs(read_yaml(config)), own=False, seen=seen):
        yield module, f"{shown} -> {config}: {where}"


def _group(pairs: Iterator[tuple[str, str]]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for module, where in pairs:
        found.setdefault(module, []).append(where)
    return found


def is_loopback(address: str) -> bool:
    """Whether a Ray ``address`` stays on this machine (empty: a Ray started here)."""
    if not address:
        return True
    host = address.removeprefix("ray://").rpartition(":")[0] or address
    return host in LOOPBACK_HOSTS


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


def untrusted_code(data: dict[str, Any], overrides: Sequence[str] = (), *,
                   own: bool = False) -> dict[str, list[str]]:
    """The modules (and Ray clusters) ``data`` names that need trust: not installed env
    packages, and not named by the user's own ``overrides``. ``own``: ``data`` is the user's
    own config, so only the run folders it names are read."""
    return _untrusted(code_refs(data), overrides, own)


def _untrusted(refs: Sequence[CodeRef], overrides: Sequence[str], own: bool) -> dict[str, list[str]]:
    given: dict[str, Any] = {}
    for text in overrides:
        given = apply_override(given, text)
    # What the user named themselves is theirs, but not the code of a run folder they named.
    theirs = {m for m, _ in _named(code_refs(given), own=False, seen=set(), follow=False)}
    found = _group(_named(refs, own=own, seen=set()))
    return {m: keys for m, keys in found.items()
            if m not in theirs and not _installed_env_package(m)}


def require_trust(config: str | Path, data: dict[str, Any], overrides: Sequence[str],
                  trust: bool, command: str, *, own: bool = False) -> None:
    """Refuse, listing the modules, when ``data`` (read from ``config``, not yet validated)
    names code that needs trust and ``trust`` is off."""
    if not trust:
        _refuse(str(config), _untrusted(code_refs(data), overrides, own), command)


def require_trust_in(key: str, source: str, trust: bool, command: str) -> None:
    """Refuse the run folder ``source`` that the user named as ``key`` (``--vs``, say) when
    its config names code that needs trust and ``trust`` is off."""
    if not trust:
        _refuse(key, _untrusted([CodeRef(key, source, "run")], (), True), command)


def _refuse(config: str, modules: dict[str, list[str]], command: str) -> None:
    if not modules:
        return
    listed = "\n  ".join(f"{m}  ({', '.join(keys)})" for m, keys in sorted(modules.items()))
    raise TrustError(
        f"{config} names code that `interplay {command}` would import and run:\n"
        f"  {listed}\n"
        "A run folder is as trusted as the code it names. Read those modules, then pass --trust "
        "to run them."
    )

"""Turning an ``env.id`` (a registered name, a module path, a factory) into env copies."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from collections.abc import Callable
from typing import Any, TypeVar

from interplay.errors import UserError

EnvFactory = Callable[..., Any]

_REGISTRY: dict[str, EnvFactory] = {}
# ``<prefix>:<name>`` ids of env families interplay adapts itself; each module's factory takes
# the name and env.kwargs, checks them, and returns a factory of copies. Imported only when
# named, so that an optional package is needed only by the runs that use it.
_FAMILIES = {
    "openspiel": ("interplay.envs.openspiel", "openspiel_factory"),
    "gymma": ("interplay.envs.gymma", "gymma_factory"),
}
T = TypeVar("T")

_NATIVE: dict[str, type] = {}
_NATIVE_FAMILIES: dict[str, Callable[[str], type]] = {}


class EnvSpecError(UserError, ValueError):
    """An ``env.id`` that does not lead to an env."""


def register_env(name: str, factory: EnvFactory) -> None:
    """Let configs name a user's env: ``env.id: <name>``.

    ``factory(**env.kwargs)`` must return a PettingZoo AEC or Parallel env.
    """
    if not callable(factory):
        raise TypeError(f"register_env({name!r}, ...): factory must be callable, got {factory!r}")
    _REGISTRY[name] = factory


def register_native(name: str, cls: type) -> None:
    """Name a natively batched env class (it steps all copies as arrays)."""
    _NATIVE[name] = cls


def native_env(cls: type[T]) -> type[T]:
    """Class decorator: name a natively batched env class by its ``task``."""
    register_native(cls.task, cls)  # type: ignore[attr-defined]
    return cls


def register_native_family(prefix: str, class_of: Callable[[str], type]) -> None:
    """Name a family of natively batched envs: ``env.id: <prefix>:<task>`` is built by the
    class ``class_of(task)`` (which checks the task when it is built)."""
    _NATIVE_FAMILIES[prefix] = class_of


def native_env_class(env_id: Any) -> type | None:
    if not isinstance(env_id, str):
        return None
    prefix, colon, task = env_id.partition(":")
    if colon and prefix in _NATIVE_FAMILIES:
        return _NATIVE_FAMILIES[prefix](task)
    return _NATIVE.get(env_id)


def make_native(cls: type, num_envs: int, max_steps: int | None, device: str,
                kwargs: dict[str, Any]) -> Any:
    """``num_envs`` copies of the natively batched env ``cls`` with ``env.kwargs``.

    A family simulated in torch (VMAS, ``on_device``) runs on ``device`` and sorts out its
    kwargs itself (its own ``max_steps`` among them); the NumPy envs take them as keywords.
    The built-in envs phrase what is wrong with the kwargs as TypeError or ValueError.
    """
    try:
        if getattr(cls, "on_device", False):
            return cls(num_envs, max_steps, device, dict(kwargs))
        return cls(num_envs=num_envs, max_steps=max_steps, **kwargs)
    except (TypeError, ValueError) as err:
        if isinstance(err, UserError):
            raise
        raise EnvSpecError(f"env.kwargs: {err}") from err


def known_env_names() -> list[str]:
    return sorted([*_REGISTRY, *_NATIVE])


def family_modules(env_id: Any) -> list[str] | None:
    """The modules outside interplay that a family's id (``gymma:rware:rware-tiny-2ag-v2``)
    imports; None when ``env_id`` is not a family's."""
    prefix, sep, name = env_id.partition(":") if isinstance(env_id, str) else ("", "", "")
    if not sep or prefix not in _FAMILIES:
        return None
    if prefix == "gymma":
        package = registering_package(name)
        return [] if package is None else [package]
    return []


def registering_package(env_id: str) -> str | None:
    """The module a ``gymma:`` id imports to register its env: the one it names
    (``rware:rware-tiny-2ag-v2``), or the installed package its first word names."""
    if ":" in env_id:
        return env_id.partition(":")[0]
    word = env_id.split("/")[0].split("-")[0]
    if not word.isidentifier():
        return None
    try:
        return word if importlib.util.find_spec(word) is not None else None
    except (ImportError, ValueError):
        return None


def _import_module(path: str, env_id: str) -> Any:
    try:
        return importlib.import_module(path)
    except ImportError as err:
        hint = _sibling_hint(path, err)
        if hint:
            pass
        elif path.startswith("mpe2"):
            hint = " (install the extra: pip install 'interplay[mpe2]')"
        elif path.startswith("pettingzoo.classic"):
            hint = " (install the extra: pip install 'interplay[classic]')"
        raise EnvSpecError(
            f"env.id {env_id!r}: cannot import module {path!r}: {type(err).__name__}: {err}{hint}. "
            f"Registered names: {', '.join(known_env_names()) or 'none'}"
        ) from err
    except (Exception, SystemExit) as err:  # the module is broken (or a script): say which
        raise EnvSpecError(
            f"env.id {env_id!r}: importing module {path!r} raised {type(err).__name__}: {err}"
        ) from err


def _sibling_hint(path: str, err: ImportError) -> str:
    """When the package is there but not the module (a typo): the closest modules it has."""
    parent, _, name = path.rpartition(".")
    if not parent or getattr(err, "name", None) != path:
        return ""
    try:
        package = importlib.import_module(parent)
    except Exception:  # noqa: BLE001 - the package itself is missing: the install hint says more
        return ""
    import difflib
    import pkgutil

    names = [m.name for m in pkgutil.iter_modules(getattr(package, "__path__", []))]
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if not close:
        return f" (package {parent!r} is installed but has no module {name!r})"
    return (f" (package {parent!r} is installed but has no module {name!r}; did you mean "
            f"{' or '.join(repr(f'{parent}.{c}') for c in close)}?)")


def _parameters(fn: Any) -> tuple[list[str], list[str]] | None:
    """``fn``'s keyword-passable parameters and the required ones; None if it takes ``**kwargs``
    or cannot be inspected."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return [p.name for p in named], [p.name for p in named if p.default is p.empty]


def _kwargs_error(what: str, bad: list[str], accepted: list[str] | None, missing: bool = False
                  ) -> EnvSpecError:
    keys = ", ".join(f"env.kwargs.{k}" for k in bad)
    problem = (f"{keys}: required by the env's constructor ({what}) but not given" if missing
               else f"{keys}: not accepted by the env's constructor ({what})")
    if accepted is not None:
        problem += f"; it accepts: {', '.join(accepted) or 'no arguments'}"
    return EnvSpecError(problem)


_UNEXPECTED = re.compile(r"^(?P<callee>[\w.<>]+)\(\) got an unexpected keyword argument '(?P<key>[^']+)'")


def _accepted_by(err: TypeError, callee: str) -> list[str] | None:
    """The parameters of the callable a TypeError names (``raw_env.__init__``), found where the
    innermost frame of its traceback could see it."""
    tb = err.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    head, *rest = callee.split(".")
    obj = frame.f_locals.get(head, frame.f_globals.get(head))
    for part in rest[:-1] if rest and rest[-1] == "__init__" else rest:
        obj = getattr(obj, part, None)
    found = _parameters(obj) if obj is not None else None
    if found is None:
        return None
    return [n for n in found[0] if n != "self"]


def _checked(fn: Callable[..., Any], kwargs: dict[str, Any], what: str) -> EnvFactory:
    """``fn(**kwargs)`` as a factory, with ``env.kwargs`` it cannot take named: now if its
    signature says so, else when the first copy is built."""
    found = _parameters(fn)
    if found is not None:
        accepted, required = found
        unknown = [k for k in kwargs if k not in accepted]
        if unknown:
            raise _kwargs_error(what, unknown, accepted)
        missing = [k for k in required if k not in kwargs]
        if missing:
            raise _kwargs_error(what, missing, accepted, missing=True)

    built = False

    def make() -> Any:
        nonlocal built
        try:
            env = fn(**kwargs)
        except TypeError as err:
            m = _UNEXPECTED.match(str(err))
            if m is None or m["key"] not in kwargs:
                _first_build_failed(built, err)
                raise
            raise _kwargs_error(what, [m["key"]], _accepted_by(err, m["callee"])) from err
        except Exception as err:  # noqa: BLE001 - named below when no copy was ever built
            _first_build_failed(built, err)
            raise
        built = True
        return env

    def _first_build_failed(built: bool, err: Exception) -> None:
        """A constructor that fails before any copy was built fails for these settings (a
        value of the wrong type, out of range...): name it, with the settings, now."""
        if built or isinstance(err, UserError):
            return
        given = ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) or "no env.kwargs"
        raise EnvSpecError(f"env: building {what} with {given} raised "
                           f"{type(err).__name__}: {err}") from err

    return make


def env_factory(env_id: Any, kwargs: dict[str, Any] | None = None, api: str = "auto") -> EnvFactory:
    """A zero-argument callable that builds one fresh copy of the env.

    ``env_id`` may be a registered name, ``pkg.module`` (its ``parallel_env()`` or ``env()``),
    ``pkg.module:function``, a family's ``openspiel:<game>`` or ``gymma:<gymnasium id>``, or
    a callable. ``api`` picks between a module's ``parallel_env``
    and ``env`` ("auto" prefers ``parallel_env``, so one env step moves every live agent).
    """
    kwargs = dict(kwargs or {})
    if callable(env_id):
        return _checked(env_id, kwargs, getattr(env_id, "__qualname__", repr(env_id)))
    if not isinstance(env_id, str) or not env_id:
        raise EnvSpecError(f"env.id must be a name, a module path or a factory, got {env_id!r}")
    if env_id in _REGISTRY:
        return _checked(_REGISTRY[env_id], kwargs, f"registered env {env_id!r}")
    prefix, sep, name = env_id.partition(":")
    if sep and prefix in _FAMILIES:
        module_path, attr = _FAMILIES[prefix]
        return getattr(importlib.import_module(module_path), attr)(name, kwargs)
    if ":" in env_id:
        module_path, _, attr = env_id.partition(":")
        module = _import_module(module_path, env_id)
        fn = getattr(module, attr, None)
        if not callable(fn):
            raise EnvSpecError(f"env.id {env_id!r}: module {module_path!r} has no callable {attr!r}")
        return _checked(fn, kwargs, env_id)
    module = _import_module(env_id, env_id)
    order = {"auto": ("parallel_env", "env"), "parallel": ("parallel_env",), "aec": ("env",)}
    if api not in order:
        raise EnvSpecError(f"env.api must be auto, aec or parallel, got {api!r}")
    for attr in order[api]:
        fn = getattr(module, attr, None)
        if callable(fn):
            return _checked(fn, kwargs, f"{env_id}.{attr}")
    wanted = " or ".join(f"{a}()" for a in order[api])
    raise EnvSpecError(f"env.id {env_id!r}: module has no {wanted} to build the env from")

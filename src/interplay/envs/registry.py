"""Turning an ``env.id`` (a registered name, a module path, a factory) into env copies."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from interplay.errors import UserError

EnvFactory = Callable[..., Any]

_REGISTRY: dict[str, EnvFactory] = {}
_NATIVE: dict[str, type] = {}


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


def native_env_class(env_id: Any) -> type | None:
    return _NATIVE.get(env_id) if isinstance(env_id, str) else None


def known_env_names() -> list[str]:
    return sorted([*_REGISTRY, *_NATIVE])


def _import_module(path: str, env_id: str) -> Any:
    try:
        return importlib.import_module(path)
    except ImportError as err:
        hint = ""
        if path.startswith("mpe2"):
            hint = " (install the extra: pip install 'interplay[mpe2]')"
        elif path.startswith("pettingzoo.classic"):
            hint = " (install the extra: pip install 'interplay[classic]')"
        raise EnvSpecError(
            f"env.id {env_id!r}: cannot import module {path!r}: {type(err).__name__}: {err}{hint}. "
            f"Registered names: {', '.join(known_env_names()) or 'none'}"
        ) from err


def env_factory(env_id: Any, kwargs: dict[str, Any] | None = None, api: str = "auto") -> EnvFactory:
    """A zero-argument callable that builds one fresh copy of the env.

    ``env_id`` may be a registered name, ``pkg.module`` (its ``parallel_env()`` or ``env()``),
    ``pkg.module:function``, or a callable. ``api`` picks between a module's ``parallel_env``
    and ``env`` ("auto" prefers ``parallel_env``, so one env step moves every live agent).
    """
    kwargs = dict(kwargs or {})
    if callable(env_id):
        return lambda: env_id(**kwargs)
    if not isinstance(env_id, str) or not env_id:
        raise EnvSpecError(f"env.id must be a name, a module path or a factory, got {env_id!r}")
    if env_id in _REGISTRY:
        factory = _REGISTRY[env_id]
        return lambda: factory(**kwargs)
    if ":" in env_id:
        module_path, _, attr = env_id.partition(":")
        module = _import_module(module_path, env_id)
        fn = getattr(module, attr, None)
        if not callable(fn):
            raise EnvSpecError(f"env.id {env_id!r}: module {module_path!r} has no callable {attr!r}")
        return lambda: fn(**kwargs)
    module = _import_module(env_id, env_id)
    order = {"auto": ("parallel_env", "env"), "parallel": ("parallel_env",), "aec": ("env",)}
    if api not in order:
        raise EnvSpecError(f"env.api must be auto, aec or parallel, got {api!r}")
    for attr in order[api]:
        fn = getattr(module, attr, None)
        if callable(fn):
            return lambda: fn(**kwargs)
    wanted = " or ".join(f"{a}()" for a in order[api])
    raise EnvSpecError(f"env.id {env_id!r}: module has no {wanted} to build the env from")

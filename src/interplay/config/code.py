"""Code a config names as ``module:attribute``: imported on demand, named in every error."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from interplay.errors import ConfigError

CodeKind = Literal["attr", "env", "player", "run", "cluster"]


@dataclass(frozen=True)
class NamesCode:
    """Marks a config field (``Annotated[..., NamesCode(kind)]``) whose value, or each item of
    a list, may name code that reading the config imports and runs, or somewhere code is sent.

    The trust check (:mod:`interplay.experiment.run_store.trust`) finds every such field in the schema,
    so a new field that names code is checked the moment it is marked. ``kind`` says how its
    value is read:

    * ``attr``: ``module:attribute``; a plain name is a registered one (``ippo``, ``mlp``);
    * ``env``: a built-in or registered env name, else a module path or ``module:function``;
    * ``player``: ``random``, a run folder, checkpoint or snapshot file (whose own config names
      code in turn), or ``module:function``;
    * ``run``: a run folder, checkpoint or snapshot file, whose own config names code in turn;
    * ``cluster``: a Ray address, to which the config, the weights and the code are sent.
    """

    kind: CodeKind


@dataclass(frozen=True)
class Holds:
    """Marks a free-form mapping field whose keys are those of another settings model (a
    policy's ``model`` is ``algo.model``'s keys): the trust check reads it with that model."""

    model: Callable[[], type]


def is_code_path(path: str) -> bool:
    """Whether ``path`` is written as ``module:attribute``, both parts named."""
    module_path, sep, attr = path.partition(":")
    return bool(sep and module_path and attr)


def load_callable(path: str, what: str) -> Callable[..., Any]:
    """Import ``module:attribute`` and return it, naming ``what`` in any error."""
    if not is_code_path(path):
        raise ConfigError(f"{what}: {path!r} must be written as module:function")
    module_path, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_path)
    except ImportError as err:
        raise ConfigError(f"{what}: cannot import {module_path!r}: {err}") from err
    except (Exception, SystemExit) as err:  # the module is broken (or a script): say which
        raise ConfigError(f"{what}: importing module {module_path!r} raised "
                          f"{type(err).__name__}: {err}") from err
    fn = getattr(module, attr, None)
    if fn is None or not callable(fn):
        raise ConfigError(f"{what}: module {module_path!r} has no callable {attr!r}")
    return fn


def names_code(entry: str) -> bool:
    """Whether ``entry`` (a ``league.fixed`` member, say) names ``module:attribute`` rather than
    a run folder or checkpoint (``RUN_DIR[:policy_id]``, which exists on disk)."""
    return (":" in entry and not Path(entry).exists()
            and not Path(entry.rpartition(":")[0]).exists())

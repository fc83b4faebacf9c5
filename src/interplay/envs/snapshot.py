"""Capture and restore the data inside a Python env object, for exact resume.

PettingZoo envs have no state API. A snapshot walks the env's object graph (attributes,
lists, dicts) and keeps the data it finds: numbers, strings, arrays and RNG states. Restoring
walks a freshly built copy of the same env the same way and puts the data back in place, so
nothing is ever unpickled and no code is run from a checkpoint. Objects the walk does not
understand (renderers, functions, modules) are left as the fresh env made them.
"""

from __future__ import annotations

import random
import types
from typing import Any

import numpy as np

from interplay.errors import UserError

_SCALARS = (bool, int, float, str, bytes, type(None), np.generic)
_SKIP = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType,
         types.MethodType, types.GeneratorType)

OBJ, LIST, DICT, TUPLE, GEN, RSTATE, PYRAND, KEEP = (
    "__obj__", "__list__", "__dict__", "__tuple__", "__generator__", "__randomstate__", "__random__",
    "__keep__")
OBJARRAY = "__objarray__"  # a NumPy array of Python objects: its shape and its items
REF = "__ref__"  # a list, tuple, dict or object met before: the number of its first visit
# What the walk did not take (not data): restore leaves the fresh value there.
_KEEP = {KEEP: True}


class SnapshotError(UserError, RuntimeError):
    """The env's structure differs from the one the snapshot was taken of."""


def _is_leaf(value: Any) -> bool:
    return isinstance(value, (*_SCALARS, np.ndarray))


def capture(root: Any) -> dict[str, Any]:
    """The data held by ``root``'s object graph, as nested dicts, lists and arrays.

    Containers (lists, tuples, dicts, objects) are numbered in the order the walk first meets
    them; one met again (held in two places: a wrapper's last observation that is also the
    runner's) is recorded as a reference to that number, so that restore makes the two places
    hold one object again."""
    seen: dict[int, int] = {}

    def walk(obj: Any) -> Any:
        if isinstance(obj, np.ndarray):
            if obj.dtype.hasobject:  # Python objects (None, strings...): taken one by one
                return {OBJARRAY: [list(obj.shape), [walk(v) for v in obj.reshape(-1)]]}
            return obj.copy()
        if isinstance(obj, _SCALARS):
            return obj
        if isinstance(obj, np.random.Generator):
            return {GEN: obj.bit_generator.state}
        if isinstance(obj, np.random.RandomState):
            return {RSTATE: obj.get_state(legacy=False)}
        if isinstance(obj, random.Random):
            return {PYRAND: list(obj.getstate())}
        if isinstance(obj, _SKIP):
            return _KEEP
        if id(obj) in seen:
            return {REF: seen[id(obj)]}
        if isinstance(obj, list | tuple):
            seen[id(obj)] = len(seen)
            tag = LIST if isinstance(obj, list) else TUPLE
            return {tag: [walk(v) for v in obj]}
        if isinstance(obj, dict):
            seen[id(obj)] = len(seen)
            return {DICT: [[k, walk(v)] for k, v in obj.items() if _is_leaf(k)]}
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict):
            return _KEEP
        seen[id(obj)] = len(seen)
        return {OBJ: {k: walk(v) for k, v in attrs.items()}}

    return walk(root)


def restore(root: Any, snap: dict[str, Any]) -> None:
    """Put the data of ``snap`` (from :func:`capture`) back into ``root``, in place."""
    seen: set[int] = set()
    made: list[Any] = []  # the restored containers, numbered as capture numbered them

    def numbered(obj: Any) -> Any:
        made.append(obj)
        return obj

    def value_of(current: Any, s: Any, where: str) -> Any:
        """The restored value for a slot now holding ``current``."""
        if isinstance(s, np.ndarray):
            # Arrays are refilled in place: other objects may hold views of them.
            if isinstance(current, np.ndarray) and current.shape == s.shape and current.dtype == s.dtype \
                    and current.flags.writeable:
                current[...] = s
                return current
            return s.copy()
        if isinstance(s, dict) and KEEP in s:
            return current
        if isinstance(s, dict) and REF in s:
            n = s[REF]
            if not 0 <= n < len(made):
                raise SnapshotError(f"{where}: refers to container {n}, which comes later")
            return current if made[n] is None else made[n]  # None: a tuple being built
        if not isinstance(s, dict):
            if type(current) is type(s) and current == s:
                return current  # unchanged: leave it (and any frozen owner) alone
            return s
        if OBJARRAY in s:
            shape, items = s[OBJARRAY]
            same = (isinstance(current, np.ndarray) and current.dtype.hasobject
                    and list(current.shape) == shape)
            olds = list(current.reshape(-1)) if same else [None] * len(items)
            arr = np.empty(len(items), dtype=object)
            for i, (o, v) in enumerate(zip(olds, items, strict=True)):
                arr[i] = value_of(o, v, f"{where}[{i}]")
            return arr.reshape(shape)
        if GEN in s:
            gen = current if isinstance(current, np.random.Generator) else np.random.default_rng()
            gen.bit_generator.state = s[GEN]
            return gen
        if RSTATE in s:
            rs = current if isinstance(current, np.random.RandomState) else np.random.RandomState()
            rs.set_state(s[RSTATE])
            return rs
        if PYRAND in s:
            r = current if isinstance(current, random.Random) else random.Random()
            state = s[PYRAND]
            r.setstate((state[0], tuple(state[1]), state[2]))
            return r
        if TUPLE in s:
            items = s[TUPLE]
            slot = len(made)
            made.append(None)  # the tuple exists only once its items do
            olds = list(current) if isinstance(current, tuple) and len(current) == len(items) else [None] * len(items)
            values = tuple(value_of(o, v, f"{where}[{i}]") for i, (o, v) in enumerate(zip(olds, items, strict=True)))
            # The same values give back the tuple already there: a frozen object's field
            # (a space's shape, say) then has nothing to set.
            if isinstance(current, tuple) and all(
                    a is b or (isinstance(a, _SCALARS) and type(a) is type(b) and a == b)
                    for a, b in zip(values, olds, strict=True)):
                values = current
            made[slot] = values
            return values
        if LIST in s:
            items = s[LIST]
            if not isinstance(current, list):
                current = []
            numbered(current)
            olds = current + [None] * (len(items) - len(current))
            new = [value_of(o, v, f"{where}[{i}]") for i, (o, v) in enumerate(zip(olds, items, strict=False))]
            current[:] = new
            return current
        if DICT in s:
            mapping: dict = numbered(current if isinstance(current, dict) else {})
            entries = {k: value_of(mapping.get(k), v, f"{where}[{k!r}]") for k, v in s[DICT]}
            kept = {k: v for k, v in mapping.items() if not _is_leaf(k)}
            mapping.clear()
            mapping.update(entries)
            mapping.update(kept)
            return mapping
        if OBJ in s:
            if current is None or _is_leaf(current):
                raise SnapshotError(
                    f"{where}: the snapshot holds an object here but the fresh env has {current!r}"
                )
            numbered(current)
            into(current, s[OBJ], where)
            return current
        raise SnapshotError(f"{where}: unreadable snapshot entry")

    def skipped(s: Any) -> None:
        """Number the containers of a snapshot part that is not put back, as capture did."""
        if not isinstance(s, dict) or KEEP in s or REF in s:
            return
        for tag in (LIST, TUPLE, DICT, OBJ):
            if tag in s:
                made.append(None)
                parts = s[tag].values() if tag == OBJ else (
                    [v for _, v in s[tag]] if tag == DICT else s[tag])
                for part in parts:
                    skipped(part)

    def into(obj: Any, attrs: dict[str, Any], where: str) -> None:
        if id(obj) in seen:  # one fresh object where the env had two: filled once
            for part in attrs.values():
                skipped(part)
            return
        seen.add(id(obj))
        for name, s in attrs.items():
            current = vars(obj).get(name)
            new = value_of(current, s, f"{where}.{name}")
            if new is not current:
                try:
                    setattr(obj, name, new)
                except AttributeError as err:  # frozen dataclasses, read-only properties
                    raise SnapshotError(f"{where}.{name}: cannot be restored ({err})") from err

    if not (isinstance(snap, dict) and OBJ in snap):
        raise SnapshotError("not an env snapshot")
    numbered(root)
    into(root, snap[OBJ], type(root).__name__)

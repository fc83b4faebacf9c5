"""Composite (Dict or Tuple) action spaces held as one flat row of numbers per agent.

Each leaf of the space (Discrete, MultiDiscrete or Box, at any depth) owns fixed columns of a
float32 row, in the space's own order: a Discrete leaf one column (its index from 0), a
MultiDiscrete leaf one per entry, a Box leaf its numbers row-major. A row goes back to the env
as the space's own structure of NumPy values, ``start`` and bounds honoured.

Legal actions cover the discrete leaves only, in the same order: ``n`` flags for a Discrete
leaf, ``sum(nvec)`` for a MultiDiscrete one. The env gives them as the observation's
``action_mask`` entry (or ``info["action_mask"]``) in one of two forms: one flat vector over
every discrete leaf in order, or a structure keyed like the action space (a dict for a Dict,
a sequence or a dict keyed by position for a Tuple) holding a mask per discrete leaf; a leaf
left out, or given None, has every action legal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

LEAF_KINDS = {spaces.Discrete: "discrete", spaces.MultiDiscrete: "multi_discrete",
              spaces.Box: "box"}


@dataclass(frozen=True)
class Leaf:
    """One leaf of a composite action space and where it sits in rows and masks."""

    path: tuple[str | int, ...]  # its keys (Dict) and positions (Tuple) from the top
    space: spaces.Space
    kind: str  # "discrete" | "multi_discrete" | "box"
    cols: slice  # its columns in an action row
    mask: slice  # its flags in a legal-action row (empty for a Box)

    @property
    def name(self) -> str:
        return ".".join(map(str, self.path))

    @property
    def sizes(self) -> list[int]:
        """Choices of each categorical this leaf is made of (none for a Box)."""
        if self.kind == "discrete":
            return [int(self.space.n)]
        if self.kind == "multi_discrete":
            return [int(n) for n in self.space.nvec]
        return []


def is_composite(space: spaces.Space) -> bool:
    return isinstance(space, spaces.Dict | spaces.Tuple)


def composite_leaves(space: spaces.Space) -> tuple[Leaf, ...]:
    """The leaves of a Dict/Tuple action space in order; ValueError naming a leaf that
    interplay cannot drive."""
    found: list[tuple[tuple[str | int, ...], spaces.Space]] = []
    _walk(space, (), found)
    if not found:
        raise ValueError("it has no leaves to act with")
    leaves = []
    col = at = 0
    for path, leaf in found:
        kind = LEAF_KINDS.get(type(leaf))
        where = ".".join(map(str, path))
        if kind is None:
            raise ValueError(f"its leaf {where!r} is {leaf}; leaves must be Discrete, "
                             "MultiDiscrete or Box")
        if kind == "multi_discrete" and leaf.nvec.ndim != 1:
            raise ValueError(f"its MultiDiscrete leaf {where!r} must be 1-D")
        width = 1 if kind == "discrete" else int(np.prod(leaf.shape))
        flags = (int(leaf.n) if kind == "discrete" else
                 int(leaf.nvec.sum()) if kind == "multi_discrete" else 0)
        leaves.append(Leaf(path, leaf, kind, slice(col, col + width), slice(at, at + flags)))
        col += width
        at += flags
    return tuple(leaves)


def _walk(space: spaces.Space, path: tuple[str | int, ...],
          out: list[tuple[tuple[str | int, ...], spaces.Space]]) -> None:
    if isinstance(space, spaces.Dict):
        for key, sub in space.spaces.items():
            _walk(sub, (*path, key), out)
    elif isinstance(space, spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            _walk(sub, (*path, i), out)
    else:
        out.append((path, space))


def width(leaves: tuple[Leaf, ...]) -> int:
    return leaves[-1].cols.stop


def mask_width(leaves: tuple[Leaf, ...]) -> int:
    return leaves[-1].mask.stop


def bounded(space: spaces.Box, actions: np.ndarray, squashed: bool) -> np.ndarray:
    """Box actions inside ``space``'s bounds: mapped from ``[-1, 1]`` onto them when the policy
    squashes (where both bounds are finite), else clipped to them. ``actions`` are rows of the
    Box's numbers, flat or in its shape."""
    low, high = space.low.reshape(-1), space.high.reshape(-1)
    flat = actions.reshape(actions.shape[0], -1)
    if squashed:
        finite = np.isfinite(low) & np.isfinite(high)
        unsquashed = low + (np.clip(flat, -1.0, 1.0) + 1.0) * 0.5 * (high - low)
        out = np.where(finite, unsquashed, flat)
    else:
        out = np.clip(flat, low, high)
    return out.astype(np.float32).reshape(actions.shape)


def rows_in_bounds(leaves: tuple[Leaf, ...], rows: np.ndarray, squashed: bool) -> np.ndarray:
    """Rows whose Box columns are mapped into their leaves' bounds (see :func:`bounded`)."""
    out = rows.astype(np.float32, copy=True)
    for leaf in leaves:
        if leaf.kind == "box":
            out[:, leaf.cols] = bounded(leaf.space, out[:, leaf.cols], squashed)
    return out


def to_env(space: spaces.Space, leaves: tuple[Leaf, ...], rows: np.ndarray) -> np.ndarray:
    """The env's own actions for rows ``[n, width]``: an object array whose item ``i`` is row
    ``i``'s dict or tuple of NumPy values, as the space's own ``sample()`` gives them."""
    n = rows.shape[0]
    values = {leaf.path: _leaf_values(leaf, rows[:, leaf.cols]) for leaf in leaves}
    out = np.empty(n, object)
    for i in range(n):
        out[i] = _assemble(space, values, i, ())
    return out


def _leaf_values(leaf: Leaf, cols: np.ndarray) -> np.ndarray:
    space = leaf.space
    if leaf.kind == "discrete":
        return np.rint(cols[:, 0]).astype(np.int64) + np.int64(space.start)
    if leaf.kind == "multi_discrete":
        return np.rint(cols).astype(space.dtype) + space.start
    return cols.astype(space.dtype).reshape(cols.shape[0], *space.shape)


def _assemble(space: spaces.Space, values: dict[tuple[str | int, ...], np.ndarray], i: int,
              path: tuple[str | int, ...]) -> Any:
    if isinstance(space, spaces.Dict):
        return {k: _assemble(s, values, i, (*path, k)) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_assemble(s, values, i, (*path, j)) for j, s in enumerate(space.spaces))
    return values[path][i]


def from_env(leaves: tuple[Leaf, ...], action: Any) -> np.ndarray:
    """The row of one env action (a dict or tuple of the space's structure): Discrete and
    MultiDiscrete values counted from 0, Box values as they are."""
    row = np.zeros(width(leaves), np.float32)
    for leaf in leaves:
        value: Any = action
        for key in leaf.path:
            value = value[key]
        arr = np.asarray(value, np.float64).reshape(-1)
        if leaf.kind != "box":
            arr = arr - np.asarray(leaf.space.start, np.float64).reshape(-1)
        row[leaf.cols] = arr
    return row


def legal_in_row(leaves: tuple[Leaf, ...], row: np.ndarray, mask: np.ndarray) -> bool:
    """Whether every discrete choice of ``row`` is legal under ``mask``."""
    for leaf in leaves:
        at = leaf.mask.start
        for size, choice in zip(leaf.sizes, row[leaf.cols], strict=False):
            if not mask[at + int(choice)]:
                return False
            at += size
    return True


def legal_row(space: spaces.Space, leaves: tuple[Leaf, ...], source: Any) -> np.ndarray:
    """The legal-action row an env's ``action_mask`` gives (see the module's docstring);
    ValueError naming the key that does not fit."""
    n = mask_width(leaves)
    if _structured(source):
        row = np.ones(n, bool)
        by_path = {leaf.path: leaf for leaf in leaves}
        _fill(space, source, (), by_path, row)
        return row
    try:
        flat = np.asarray(source)
    except (ValueError, TypeError) as err:
        raise ValueError(f"action_mask is not an array ({err})") from None
    if flat.dtype.kind not in "biuf" or flat.size != n:
        discrete = ", ".join(f"{leaf.name}: {leaf.mask.stop - leaf.mask.start}"
                             for leaf in leaves if leaf.kind != "box")
        raise ValueError(
            f"action_mask has {flat.size} entries (dtype {flat.dtype}) but the discrete leaves "
            f"of the action space {space} need {n} ({discrete or 'none'}), or a mask per leaf "
            "keyed like the action space")
    return flat.reshape(-1).astype(bool)


def _structured(source: Any) -> bool:
    """A mask per leaf (a dict, or a sequence holding arrays or None) rather than one vector."""
    if isinstance(source, Mapping):
        return True
    if isinstance(source, tuple | list):
        return any(x is None or np.ndim(x) > 0 for x in source)
    return False


def _fill(space: spaces.Space, source: Any, path: tuple[str | int, ...],
          by_path: dict[tuple[str | int, ...], Leaf], row: np.ndarray) -> None:
    if source is None:  # this part has every action legal
        return
    where = ".".join(map(str, path))
    if isinstance(space, spaces.Dict | spaces.Tuple):
        for key, sub in _parts(space, source, where):
            _fill(space[key], sub, (*path, key), by_path, row)
        return
    leaf = by_path[path]
    if leaf.kind == "box":
        raise ValueError(f"action_mask key {where!r}: its action is {leaf.space}, which "
                         "takes no mask")
    try:
        flags = np.asarray(source)
    except (ValueError, TypeError) as err:
        raise ValueError(f"action_mask key {where!r} is not an array ({err})") from None
    need = leaf.mask.stop - leaf.mask.start
    if flags.dtype.kind not in "biuf" or flags.size != need:
        raise ValueError(f"action_mask key {where!r} has {flags.size} entries (dtype "
                         f"{flags.dtype}) but its action space {leaf.space} needs {need}")
    row[leaf.mask] = flags.reshape(-1).astype(bool)


def _parts(space: spaces.Dict | spaces.Tuple, source: Any, where: str) -> list[tuple[Any, Any]]:
    """The (key, mask) pairs a mask of a Dict or Tuple part holds, checked against its keys."""
    keys: list[Any] = (list(space.spaces) if isinstance(space, spaces.Dict)
                       else list(range(len(space.spaces))))
    at = f"action_mask key {where!r}" if where else "action_mask"
    if isinstance(source, Mapping):
        extra = [k for k in source if k not in keys]
        if extra:
            raise ValueError(f"{at}: keys not in the action space {space}: {extra} "
                             f"(its keys: {keys})")
        return [(k, source[k]) for k in keys if k in source]
    if isinstance(space, spaces.Tuple) and isinstance(source, Sequence) \
            and not isinstance(source, str) and len(source) == len(keys):
        return list(zip(keys, source, strict=True))
    raise ValueError(f"{at} is a {type(source).__name__}; for the action space {space} give a "
                     f"dict keyed by {keys}" + (" or a sequence of that length"
                                                 if isinstance(space, spaces.Tuple) else ""))


def sample_mask(space: spaces.Space, leaves: tuple[Leaf, ...], row: np.ndarray) -> Any:
    """A legal-action row as the mask the space's own ``sample(mask=...)`` takes: the space's
    structure with int8 flags for Discrete leaves, a tuple of them for MultiDiscrete ones and
    None for Box ones."""
    masks: dict[tuple[str | int, ...], Any] = {}
    for leaf in leaves:
        flags = row[leaf.mask].astype(np.int8)
        if leaf.kind == "multi_discrete":
            masks[leaf.path] = tuple(np.split(flags, np.cumsum(leaf.sizes)[:-1]))
        else:
            masks[leaf.path] = flags if leaf.kind == "discrete" else None
    return _assemble(space, {p: [m] for p, m in masks.items()}, 0, ())

"""How one agent's env spaces become the flat arrays that policies see, and back."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

from interplay.envs import composite
from interplay.envs.composite import Leaf
from interplay.envs.leaves import Leaves, leaf_layout
from interplay.errors import UserError

MASK_KEY = "action_mask"


class SpaceError(UserError, ValueError):
    """A space interplay cannot drive, named with the agent it belongs to."""


class ObservationError(UserError, ValueError):
    """An observation (or action mask) from the env that does not fit the agent's space."""


def observation_error(agent: str, space: spaces.Space, obs: Any, err: Exception | None = None
                      ) -> ObservationError:
    """Name the agent, its declared space and what came instead."""
    if isinstance(obs, np.ndarray | np.generic):
        got = f"an array of shape {obs.shape} and dtype {obs.dtype}"
    elif isinstance(obs, Mapping):
        got = f"a {type(obs).__name__} with keys {list(obs)}"
    else:
        try:
            arr = np.asarray(obs)
            got = f"a {type(obs).__name__} of shape {arr.shape} (as an array, dtype {arr.dtype})"
        except Exception:  # noqa: BLE001 - not even an array: its type says enough
            got = f"a {type(obs).__name__}"
    why = f" ({err})" if err is not None and str(err) else ""
    return ObservationError(f"agent {agent!r}: observation space {space} got {got}{why}")


@dataclass(frozen=True)
class ObsView:
    """The policy-side view of one agent's observation space.

    Dict/Tuple observations are flattened to one float vector; an ``action_mask`` entry is
    taken out of the observation and returned separately. A Box observation of any shape (or
    the Box ``observation`` beside an ``action_mask``, as in PettingZoo's board games) is
    kept as it is, row-major, in its own dtype when that is ``uint8`` (image frames stay bytes
    until a network scales them) and as float32 otherwise. A Dict or Tuple with an image entry
    is kept entry by entry (``leaves``, :mod:`interplay.envs.leaves`): its image bytes stay
    bytes too.
    """

    space: spaces.Space
    dim: int
    has_mask_key: bool
    plain: bool = False  # a Box (beside a mask or not): written as it is, no flattening
    shape: tuple[int, ...] = ()  # the Box's shape when plain: what a plain write compares
    dtype: Any = np.float32  # how rows of this observation are stored
    leaves: Leaves | None = None  # a Dict/Tuple with image entries: where each entry sits
    # Many observations of it can be flattened a leaf of the space at a time (see
    # ``batch_rows``): Discrete, MultiBinary, MultiDiscrete, Dict and Tuple spaces with no
    # action_mask and no image entries.
    batched: bool = False

    def write(self, obs: Any, rows: np.ndarray, e: int) -> None:
        """Write the flat view of ``obs`` into ``rows[e]``; raise ValueError (or TypeError,
        KeyError) when ``obs`` does not fit the space."""
        if self.plain and fits_as_is(obs, self.shape, self.dtype):
            rows[e] = np.reshape(obs, -1)
        else:  # checks the shape on the way
            self.flatten(obs, rows[e])

    def shaped(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` (``[E, dim]``) as ``[E, *shape]``, a view, for writing whole observations."""
        return rows.reshape(rows.shape[0], *self.shape) if self.plain else rows

    def flatten(self, obs: Any, out: np.ndarray) -> None:
        """Write the flat float view of ``obs`` into ``out`` (shape ``[dim]``), or its leaves
        when it has them."""
        space = self.space
        if self.leaves is not None:
            inner = {k: v for k, v in obs.items() if k != MASK_KEY} if self.has_mask_key else obs
            _write_leaves(self.leaves, inner, out)
            return
        if self.has_mask_key:
            inner = {k: v for k, v in obs.items() if k != MASK_KEY}
            policy_space = _policy_space(space, True)
            if not isinstance(policy_space, spaces.Dict) and set(inner) == {"observation"}:
                _flatten_into(policy_space, inner["observation"], out)
                return
            _flatten_into(spaces.Dict({k: space[k] for k in space.spaces if k != MASK_KEY}), inner, out)
            return
        _flatten_into(space, obs, out)

    def unflatten(self, flat: np.ndarray) -> Any:
        """The env-shaped observation for a flat row (masks come back all-legal)."""
        if self.leaves is not None:
            return self.leaves.read(flat)
        return spaces.unflatten(_policy_space(self.space, self.has_mask_key), flat)


def _policy_space(space: spaces.Space, has_mask_key: bool) -> spaces.Space:
    if not has_mask_key:
        return space
    inner = {k: s for k, s in space.spaces.items() if k != MASK_KEY}
    if len(inner) == 1 and "observation" in inner:
        return inner["observation"]
    return spaces.Dict(inner)


_LEAVES = (spaces.Box, spaces.Discrete, spaces.MultiBinary, spaces.MultiDiscrete)


def _batchable(space: spaces.Space) -> bool:
    """Whether :func:`batch_rows` can flatten observations of ``space``."""
    if isinstance(space, spaces.Dict | spaces.Tuple):
        subs = space.spaces.values() if isinstance(space, spaces.Dict) else space.spaces
        return all(_batchable(sub) for sub in subs)
    return isinstance(space, _LEAVES)


def batch_rows(space: spaces.Space, part: Sequence[Any], dim: int) -> np.ndarray | None:
    """The flat float32 rows ``[n, dim]`` of observations ``part`` of ``space``, built a leaf of
    the space at a time, exactly as :meth:`ObsView.flatten` writes each one; None when any of
    them does not fit at a glance (a key missing or extra, a shape, a dtype, a value out of
    range, byte images): then they are written one by one, which names it."""
    out = np.empty((len(part), dim), np.float32)
    try:
        return out if _fill_rows(space, part, out, cast=False) else None
    except (TypeError, KeyError, ValueError, IndexError):  # not containers, ragged arrays
        return None


def _fill_rows(space: spaces.Space, part: Sequence[Any], out: np.ndarray, cast: bool) -> bool:
    """Write ``part`` into ``out`` a leaf at a time; False when it cannot. ``cast``: below a
    Tuple, MultiBinary or MultiDiscrete, where Gymnasium's ``flatten`` (which one by one
    writes them) casts each Box to its dtype first."""
    n = len(part)
    if isinstance(space, spaces.Dict | spaces.Tuple):
        keys = list(space.spaces) if isinstance(space, spaces.Dict) else range(len(space.spaces))
        subs = space.spaces.values() if isinstance(space, spaces.Dict) else space.spaces
        # Every key is found below: with this count, no observation holds another.
        if sum(map(len, part)) != n * len(keys):
            return False
        at = 0
        for key, sub in zip(keys, subs, strict=True):
            width = spaces.flatdim(sub)
            if not _fill_rows(sub, list(map(operator.itemgetter(key), part)),
                              out[:, at:at + width], cast or isinstance(space, spaces.Tuple)):
                return False
            at += width
        return True
    arr = np.asarray(part)
    if arr.shape != (n, *space.shape) or arr.dtype.kind not in NUMBER_KINDS:
        return False
    if isinstance(space, spaces.Box):
        if space.dtype == np.uint8:  # bytes are checked for their range one by one
            return False
        out[:] = (arr.astype(space.dtype) if cast else arr).reshape(n, -1)
        return True
    if isinstance(space, spaces.MultiBinary):
        out[:] = arr.astype(space.dtype).reshape(n, -1)
        return True
    if arr.dtype.kind not in "iu":  # Discrete and MultiDiscrete values: whole numbers
        return False
    if isinstance(space, spaces.Discrete):
        sizes, index = np.array([space.n]), arr.reshape(n, 1) - int(space.start)
    else:
        sizes = space.nvec.reshape(-1)
        index = arr.reshape(n, -1) - space.start.reshape(-1)
    if n and ((index < 0).any() or (index >= sizes).any()):
        return False
    out[:] = 0.0
    out[np.arange(n)[:, None], np.cumsum(sizes) - sizes + index] = 1.0
    return True


def fits_as_is(obs: Any, shape: tuple[int, ...], dtype: Any) -> bool:
    """Whether ``obs`` is an array that can be written into a row as it is: the space's shape,
    and the row's own dtype (or a float32 row and a number dtype); the rest goes through
    :meth:`ObsView.flatten`, which checks it."""
    if not isinstance(obs, np.ndarray) or obs.shape != shape:
        return False
    return obs.dtype == dtype or (dtype is np.float32 and obs.dtype.kind in NUMBER_KINDS)


NUMBER_KINDS = "biuf"  # dtype kinds an observation may come in: bool, ints, floats


def _numbers(space: spaces.Space, obs: Any) -> np.ndarray:
    """``obs`` as an array of numbers; strings, objects (None...) and complex numbers, which a
    cast would turn into NaN or silently change, are refused."""
    arr = np.asarray(obs)
    if arr.dtype.kind not in NUMBER_KINDS:
        raise ValueError(f"its dtype {arr.dtype} is not a number type")
    if space.dtype == np.uint8 and arr.dtype != np.uint8 and arr.size:
        if arr.min() < 0 or arr.max() > 255 or (arr.dtype.kind == "f" and (arr % 1).any()):
            raise ValueError(f"values {arr.min()}..{arr.max()} do not fit its dtype uint8 "
                             "(whole numbers 0 to 255)")
    return arr


def _write_leaves(leaves: Leaves, obs: Any, out: np.ndarray) -> None:
    """Write each leaf of ``obs`` into its slice of the row ``out``: image bytes as they are,
    the rest as float32 values (their bytes, in a byte row)."""
    for leaf, value in zip(leaves.leaves, leaves.entries(obs), strict=True):
        cell = out[leaf.start:leaf.end]
        kept = leaf.shape if leaf.image else (leaf.size,)
        try:
            if leaf.dtype == np.uint8:
                arr = _numbers(leaf.space, value)
                if arr.shape != leaf.shape:
                    raise ValueError(f"its shape is not {leaf.shape}")
                cell[:] = arr.reshape(-1)
            elif leaves.bytes:
                values = np.empty(kept, np.float32)
                _flatten_into(leaf.space, value, values)
                if not np.isfinite(values).all():  # the runner's own check sees bytes only
                    raise ValueError("it holds NaN or inf")
                cell[:] = values.reshape(-1).view(np.uint8)
            else:
                _flatten_into(leaf.space, value, cell.reshape(kept))
        except (ValueError, TypeError) as err:
            raise ValueError(f"key {leaf.key!r}: {err}") from None


def _flatten_into(space: spaces.Space, obs: Any, out: np.ndarray) -> None:
    if isinstance(space, spaces.Box):
        arr = _numbers(space, obs)
        if arr.shape != space.shape:  # the same size in another shape would pass unseen
            raise ValueError(f"its shape is not {space.shape}")
        out[:] = arr.reshape(out.shape)  # a flat row, or one kept in the Box's shape
    elif isinstance(space, spaces.Dict):
        if not isinstance(obs, Mapping):
            raise ValueError(f"it is not a dict with keys {list(space.spaces)}")
        if obs.keys() != space.spaces.keys():
            missing = [k for k in space.spaces if k not in obs]
            extra = [k for k in obs if k not in space.spaces]
            raise ValueError("; ".join(
                [f"keys missing: {missing}"] * bool(missing) + [f"keys not in the space: {extra}"] * bool(extra)))
        at = 0
        for key, sub in space.spaces.items():
            n = spaces.flatdim(sub)
            try:
                _flatten_into(sub, obs[key], out[at:at + n])
            except (ValueError, TypeError) as err:
                raise ValueError(f"key {key!r}: {err}") from None
            at += n
    elif isinstance(space, spaces.Discrete):
        arr = _numbers(space, obs)
        if arr.shape != () or (arr.dtype.kind == "f" and arr % 1):
            raise ValueError(f"{obs!r} is not one of its values")
        i = int(arr) - int(space.start)
        if not 0 <= i < space.n:  # a negative index would land on another value unseen
            raise ValueError(f"{obs} is not one of its values")
        out[:] = 0.0
        out[i] = 1.0
    else:
        out[:] = spaces.flatten(space, obs).astype(np.float32, copy=False)


def obs_view(space: spaces.Space, agent: str) -> ObsView:
    """Build the flat view of ``agent``'s observation space, or say why it can't be."""
    has_mask = isinstance(space, spaces.Dict) and MASK_KEY in space.spaces
    try:
        dim = spaces.flatdim(_policy_space(space, has_mask))
    except (NotImplementedError, ValueError) as err:
        raise SpaceError(
            f"agent {agent!r}: observation space {space} cannot be flattened ({err}); "
            "use Box, Discrete, MultiDiscrete, MultiBinary, Dict or Tuple spaces"
        ) from err
    box = _policy_space(space, has_mask)  # a Box, also one beside an action_mask, keeps its shape
    leaves = leaf_layout(box)
    if leaves is not None:
        return ObsView(space=space, dim=leaves.dim, has_mask_key=has_mask, dtype=leaves.dtype,
                       leaves=leaves)
    if not isinstance(box, spaces.Box):
        return ObsView(space=space, dim=dim, has_mask_key=has_mask,
                       batched=not has_mask and _batchable(box))
    dtype = np.uint8 if box.dtype == np.uint8 else np.float32
    return ObsView(space=space, dim=dim, has_mask_key=has_mask, plain=True,
                   shape=tuple(box.shape), dtype=dtype)


@dataclass(frozen=True)
class ActionView:
    """How one agent's actions are held in arrays and handed back to the env.

    Discrete actions are int64 indices counted from 0 (the space's ``start`` is added on the
    way out); MultiDiscrete actions are int64 rows; Box actions are float32 rows, clipped to
    the bounds, or mapped from ``[-1, 1]`` onto them when the policy squashes. Dict and Tuple
    actions (``composite``) are float32 rows with fixed columns per leaf (see
    :mod:`interplay.envs.composite`).
    """

    space: spaces.Space
    kind: str  # "discrete" | "multi_discrete" | "box" | "composite"
    shape: tuple[int, ...]
    dtype: type
    mask_dim: int  # 0 when actions cannot be masked
    start: int = 0  # a Discrete space's first action
    leaves: tuple[Leaf, ...] = ()  # a composite space's leaves, in its order
    # Some of its numbers are Box actions, which :meth:`to_env_batch` maps into bounds.
    has_box: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "has_box", self.kind == "box"
                           or any(leaf.kind == "box" for leaf in self.leaves))

    def to_env(self, rows: np.ndarray) -> np.ndarray:
        """The env's own actions for a batch of rows (``[n, *shape]``); row ``i`` is copy ``i``'s.

        Indexing the result gives NumPy values, as the space's own ``sample()`` does (a dict
        or tuple of them for a composite space).
        """
        space = self.space
        if self.kind == "discrete":
            return rows + self.start if self.start else rows
        if self.kind == "multi_discrete":
            return rows.astype(space.dtype) + space.start
        if self.kind == "composite":
            return composite.to_env(space, self.leaves, rows)
        return rows.astype(space.dtype)

    def to_env_batch(self, actions: np.ndarray, squashed: bool) -> np.ndarray:
        """Map a batch of policy actions into the space's bounds (Box numbers; the rest pass
        through)."""
        if self.kind == "box":
            return composite.bounded(self.space, actions, squashed)
        if self.kind == "composite" and self.has_box:
            return composite.rows_in_bounds(self.leaves, actions, squashed)
        return actions

    def legal(self, source: Any) -> np.ndarray:
        """The legal-action row of an env's ``action_mask``; ValueError when it does not fit."""
        if self.kind == "composite":
            return composite.legal_row(self.space, self.leaves, source)
        row = np.asarray(source, dtype=bool).reshape(-1)
        if row.shape[0] != self.mask_dim:
            raise ValueError(f"action_mask has {row.shape[0]} entries but the action space "
                             f"{self.space} needs {self.mask_dim}")
        return row


def action_view(space: spaces.Space, agent: str) -> ActionView:
    if isinstance(space, spaces.Discrete):
        return ActionView(space, "discrete", (), np.int64, int(space.n), int(space.start))
    if isinstance(space, spaces.MultiDiscrete):
        if space.nvec.ndim != 1:
            raise SpaceError(f"agent {agent!r}: MultiDiscrete action space {space} must be 1-D")
        return ActionView(space, "multi_discrete", space.shape, np.int64, int(space.nvec.sum()))
    if isinstance(space, spaces.Box):
        return ActionView(space, "box", space.shape, np.float32, 0)
    if composite.is_composite(space):
        try:
            leaves = composite.composite_leaves(space)
        except ValueError as err:
            raise SpaceError(f"agent {agent!r}: action space {space}: {err}") from None
        return ActionView(space, "composite", (composite.width(leaves),), np.float32,
                          composite.mask_width(leaves), leaves=leaves)
    raise SpaceError(
        f"agent {agent!r}: action space {space} is not supported; "
        "use Discrete, MultiDiscrete, Box, or a Dict or Tuple of them"
    )


def same_space(a: spaces.Space, b: spaces.Space) -> bool:
    """Spaces equal in type, shape, bounds and dtype (gymnasium's ``==``)."""
    try:
        return bool(a == b)
    except (ValueError, TypeError):
        return False

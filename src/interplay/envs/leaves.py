"""Dict and Tuple observations with image entries, kept entry by entry in one row per agent.

Flattening such an observation into one float vector would store every image byte as four,
and would hand a network a vector it cannot read as pictures. Instead each top-level entry (a
*leaf*) keeps its own slice of the row: image leaves (a Box of rank 2 or 3) their values as
they are, the other leaves their flat float view (Discrete one-hot, as flattening gives). When
some image leaf is ``uint8`` the row is bytes: image bytes stay bytes, and every float leaf
takes four bytes per value (its float32 bytes, native order). Otherwise the row is float32 and
holds exactly what flattening the observation would give.

:func:`interplay.envs.spaces.obs_view` writes rows through this layout; networks read the
leaves back with :meth:`Leaves.decode` (in torch); the on-policy learners standardise the
float leaves through :meth:`Leaves.float_columns`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

FLOAT_BYTES = 4


def is_image_leaf(space: spaces.Space) -> bool:
    """A leaf kept as an image: a Box of rank 2 (one channel) or 3 (HWC or CHW)."""
    return isinstance(space, spaces.Box) and len(space.shape) in (2, 3)


@dataclass(frozen=True)
class Leaf:
    """One top-level entry of the observation and where it sits in a row."""

    key: str  # the Dict key, or the Tuple index as a string
    space: spaces.Space
    image: bool
    shape: tuple[int, ...]  # an image's own shape; a float leaf's flat width, ``(n,)``
    dtype: Any  # how its values are kept: uint8 (image bytes) or float32
    start: int  # its first element of the row (a byte in a byte row)
    end: int

    @property
    def size(self) -> int:
        """How many values it holds."""
        return int(np.prod(self.shape))


@dataclass(frozen=True)
class Leaves:
    """How one observation's leaves share a row of ``dim`` elements of ``dtype``."""

    space: spaces.Dict | spaces.Tuple  # the observation without its action_mask
    leaves: tuple[Leaf, ...]
    dtype: Any  # uint8 (bytes) when some image leaf is uint8, else float32
    dim: int

    @property
    def keys(self) -> list[str]:
        return [leaf.key for leaf in self.leaves]

    @property
    def bytes(self) -> bool:
        return self.dtype == np.uint8

    @property
    def flat_dim(self) -> int:
        """How many values the leaves hold: the width of the flattened observation."""
        return sum(leaf.size for leaf in self.leaves)

    def leaf(self, key: str) -> Leaf:
        return next(leaf for leaf in self.leaves if leaf.key == key)

    # -- rows, in NumPy -----------------------------------------------------------------------
    def entries(self, obs: Any) -> list[Any]:
        """The leaves' values of an env observation, in leaf order; ValueError when its keys
        (or length) are not the space's."""
        if isinstance(self.space, spaces.Dict):
            if not isinstance(obs, Mapping):
                raise ValueError(f"it is not a dict with keys {self.keys}")
            missing = [k for k in self.keys if k not in obs]
            extra = [k for k in obs if k not in self.space.spaces]
            if missing or extra:
                raise ValueError("; ".join([f"keys missing: {missing}"] * bool(missing)
                                           + [f"keys not in the space: {extra}"] * bool(extra)))
            return [obs[k] for k in self.keys]
        if not isinstance(obs, Sequence) or len(obs) != len(self.leaves):
            raise ValueError(f"it is not a tuple of {len(self.leaves)} entries")
        return list(obs)

    def values(self, rows: np.ndarray, key: str) -> np.ndarray:
        """Leaf ``key``'s values in rows ``[..., dim]``: ``[..., size]``, in its own dtype."""
        leaf = self.leaf(key)
        cell = rows[..., leaf.start:leaf.end]
        if self.bytes and leaf.dtype != np.uint8:
            return np.ascontiguousarray(cell).view(np.float32)
        return cell

    def read(self, row: np.ndarray) -> Any:
        """The env-shaped observation a row holds."""
        out = {}
        for leaf in self.leaves:
            values = self.values(row, leaf.key)
            if leaf.image:
                out[leaf.key] = values.reshape(leaf.shape).astype(leaf.space.dtype)
            else:
                out[leaf.key] = spaces.unflatten(leaf.space, values.astype(np.float32))
        if isinstance(self.space, spaces.Tuple):
            return tuple(out[leaf.key] for leaf in self.leaves)
        return out

    def float_columns(self, stack: int = 1) -> np.ndarray:
        """The elements of a row of ``stack`` stacked observations that hold float leaves
        (four bytes per value in a byte row), in row order; what standardising touches."""
        cols = [np.arange(leaf.start, leaf.end) for leaf in self.leaves if not leaf.image]
        one = np.concatenate(cols) if cols else np.zeros(0, np.int64)
        return np.concatenate([one + i * self.dim for i in range(stack)])

    def read_floats(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The float leaves' values at ``cols`` (from :meth:`float_columns`) of ``rows``."""
        picked = np.ascontiguousarray(rows[..., cols])
        return picked.view(np.float32) if self.bytes else picked.astype(np.float32)

    def write_floats(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        """Put float values back at ``cols`` of ``rows`` (the inverse of :meth:`read_floats`)."""
        values = np.ascontiguousarray(values, np.float32)
        rows[..., cols] = values.view(np.uint8) if self.bytes else values

    # -- rows, in torch -----------------------------------------------------------------------
    def decode(self, x: torch.Tensor, stack: int) -> dict[str, torch.Tensor]:
        """Each leaf of rows ``[N, stack * dim]`` as floats ``[N, stack, size]``; image bytes
        are not scaled here. A byte row may come widened to float (its values whole numbers
        0..255): it is narrowed back first, exactly."""
        n = x.shape[0]
        if self.bytes and x.dtype != torch.uint8:
            x = x.to(torch.uint8)
        x = x.reshape(n, stack, self.dim)
        out = {}
        for leaf in self.leaves:
            cell = x[..., leaf.start:leaf.end]
            if self.bytes and leaf.dtype != np.uint8:
                cell = cell.contiguous().view(torch.float32)
            out[leaf.key] = cell.float()
        return out


def leaf_layout(space: spaces.Space) -> Leaves | None:
    """The leaves of a Dict or Tuple observation (its ``action_mask`` already taken out) with
    at least one image entry; None for any other space (it is flattened as it always was)."""
    if isinstance(space, spaces.Dict):
        items = [(str(k), s) for k, s in space.spaces.items()]
    elif isinstance(space, spaces.Tuple):
        items = [(str(i), s) for i, s in enumerate(space.spaces)]
    else:
        return None
    if not any(is_image_leaf(s) for _, s in items):
        return None
    byte_row = any(is_image_leaf(s) and s.dtype == np.uint8 for _, s in items)
    leaves, at = [], 0
    for key, sub in items:
        image = is_image_leaf(sub)
        dtype = np.uint8 if image and sub.dtype == np.uint8 else np.float32
        shape = tuple(sub.shape) if image else (spaces.flatdim(sub),)
        width = int(np.prod(shape)) * (FLOAT_BYTES if byte_row and dtype == np.float32 else 1)
        leaves.append(Leaf(key, sub, image, shape, dtype, at, at + width))
        at += width
    return Leaves(space, tuple(leaves), np.uint8 if byte_row else np.float32, at)

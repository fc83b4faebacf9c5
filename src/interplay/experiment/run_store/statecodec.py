"""Turn a training state into objects that ``torch.load(weights_only=True)`` accepts, and back.

That loader refuses NumPy arrays and scalars (they unpickle through NumPy's own globals), so
they travel as raw bytes in a ``uint8`` tensor with their dtype descriptor and shape; everything
it does accept (tensors, tuples, sets, big ints, bytes) passes through untouched. Any other
type is refused at save time with its place in the state named, rather than producing a
checkpoint that cannot be loaded later.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
import torch

TAG = "__interplay__"

_ATOMS = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size)


class StateDecodeError(ValueError):
    """An encoded state holds a tag this version does not know."""


def encode(obj: Any, where: str = "state") -> Any:
    """Return ``obj`` with NumPy values replaced by tagged tensors; refuse unsupported types."""
    if type(obj) in _ATOMS:
        return obj
    if isinstance(obj, torch.Tensor):
        if type(obj) not in (torch.Tensor, torch.nn.Parameter):
            raise TypeError(f"{where}: tensor subclass {type(obj).__name__} cannot be checkpointed")
        return obj
    if isinstance(obj, np.ndarray | np.generic):
        return _encode_numpy(obj, where)
    if type(obj) in (dict, OrderedDict):
        for key in obj:
            _check_key(key, f"{where} key {key!r}")
        items = {k: encode(v, f"{where}[{k!r}]") for k, v in obj.items()}
        if TAG in obj:  # a user dict that would read as one of our tags
            return {TAG: "dict", "ordered": type(obj) is OrderedDict, "items": list(items.items())}
        return OrderedDict(items) if type(obj) is OrderedDict else items
    if type(obj) is list:
        return [encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if type(obj) is tuple:
        return tuple(encode(v, f"{where}[{i}]") for i, v in enumerate(obj))
    if type(obj) is set:
        for v in obj:
            _check_key(v, f"{where} element {v!r}")
        return obj
    raise TypeError(
        f"{where}: {type(obj).__module__}.{type(obj).__qualname__} cannot be checkpointed; "
        "use tensors, NumPy arrays, dict/list/tuple/set and Python scalars")


def decode(obj: Any) -> Any:
    """Invert :func:`encode`."""
    if type(obj) in (dict, OrderedDict):
        if TAG not in obj:
            items = {k: decode(v) for k, v in obj.items()}
            return OrderedDict(items) if type(obj) is OrderedDict else items
        kind = obj[TAG]
        if kind == "dict":
            items = {k: decode(v) for k, v in obj["items"]}
            return OrderedDict(items) if obj["ordered"] else items
        if kind in ("ndarray", "npscalar"):
            dtype = np.lib.format.descr_to_dtype(obj["descr"])
            arr = obj["data"].cpu().numpy().view(dtype).reshape(obj["shape"])
            return arr[()] if kind == "npscalar" else arr
        raise StateDecodeError(f"unknown tag {kind!r}; was this saved by a newer interplay?")
    if type(obj) is list:
        return [decode(v) for v in obj]
    if type(obj) is tuple:
        return tuple(decode(v) for v in obj)
    return obj


def _encode_numpy(obj: np.ndarray | np.generic, where: str) -> dict[str, Any]:
    arr = np.asarray(obj)
    if arr.dtype.hasobject:
        raise TypeError(f"{where}: NumPy arrays of Python objects cannot be checkpointed")
    raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    return {
        TAG: "npscalar" if isinstance(obj, np.generic) else "ndarray",
        "descr": np.lib.format.dtype_to_descr(arr.dtype),
        "shape": list(arr.shape),
        "data": torch.from_numpy(raw.copy()),
    }


def _check_key(key: Any, where: str) -> None:
    if type(key) is tuple:
        for k in key:
            _check_key(k, where)
    elif type(key) not in _ATOMS:
        raise TypeError(f"{where}: keys and set elements must be Python scalars, str or tuples")

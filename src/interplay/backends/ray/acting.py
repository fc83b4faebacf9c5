"""What acting changes in an algorithm: its random generators.

An env runner acts with its own copy of the algorithm and actors. The learner's state is
sent to it after updates; the generators it draws exploration from stay its own, and those of
the first runner are copied back to the learner, so that a run on one runner draws exactly
what a local run draws, and its checkpoints hold those draws' state.
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import torch

_LEAVES = (str, bytes, int, float, bool, type(None), np.ndarray, np.generic, torch.Tensor,
           torch.nn.Module, torch.optim.Optimizer, type, types.FunctionType,
           types.MethodType, types.BuiltinFunctionType, types.ModuleType)


def generators(*roots: Any) -> list[np.random.Generator]:
    """Every NumPy generator reachable from ``roots`` (attributes, mappings, sequences), each
    once, in the order a walk meets them: the same order for objects built the same way."""
    found: list[np.random.Generator] = []
    seen: set[int] = set()

    def walk(obj: Any, depth: int) -> None:
        if id(obj) in seen or depth > 8 or isinstance(obj, _LEAVES):
            return
        seen.add(id(obj))
        if isinstance(obj, np.random.Generator):
            found.append(obj)
        elif isinstance(obj, dict):
            for v in obj.values():
                walk(v, depth + 1)
        elif isinstance(obj, list | tuple | set | frozenset):
            for v in obj:
                walk(v, depth + 1)
        elif hasattr(obj, "__dict__"):
            for v in vars(obj).values():
                walk(v, depth + 1)

    for root in roots:
        walk(root, 0)
    return found


def states(gens: list[np.random.Generator]) -> list[dict[str, Any]]:
    return [g.bit_generator.state for g in gens]


def set_states(gens: list[np.random.Generator], saved: dict[int, dict[str, Any]]) -> None:
    for i, state in saved.items():
        gens[i].bit_generator.state = state


def to_cpu(tree: Any) -> Any:
    """``tree`` with every tensor on the CPU (runners act there)."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().cpu()
    if isinstance(tree, dict):
        return {k: to_cpu(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(to_cpu(v) for v in tree)
    return tree


def cpu_weights(algo: Any, actors: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """What the runners take in after an update: the algorithm's state and each actor's that
    has one, every tensor on the CPU (runners act there, whatever the learner's device)."""
    return (to_cpu(algo.state_dict()),
            {p: to_cpu(a.state_dict()) for p, a in actors.items() if hasattr(a, "state_dict")})

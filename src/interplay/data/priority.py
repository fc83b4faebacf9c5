"""Prioritised replay: rows drawn in proportion to a priority, with importance weights.

A row's priority is ``(|TD error| + eps) ** alpha``; a new row gets the largest priority
given so far, so it is drawn at least once soon. Draws are stratified (the total is cut into
``batch`` equal segments, one draw in each) and looked up in a sum tree, so both drawing and
updating cost ``O(batch * log capacity)``. Each draw carries the importance weight
``(n * P(i)) ** -beta``, divided by the batch's largest, that undoes the bias of drawing
unevenly as ``beta`` goes to 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class SumTree:
    """Non-negative values at ``capacity`` leaves and their sums at the inner nodes."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.leaves = 1 << max(0, (capacity - 1).bit_length())
        self.tree = np.zeros(2 * self.leaves, np.float64)  # node 1 is the root

    @property
    def total(self) -> float:
        return float(self.tree[1])

    def values(self, index: np.ndarray) -> np.ndarray:
        return self.tree[self.leaves + np.asarray(index, np.int64)]

    def set(self, index: np.ndarray, values: np.ndarray) -> None:
        node = self.leaves + np.asarray(index, np.int64)
        self.tree[node] = values  # the last of repeated indices wins
        node = np.unique(node // 2)
        while node[0] >= 1:
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]
            if node[0] == 1:
                break
            node = np.unique(node // 2)

    def find(self, mass: np.ndarray) -> np.ndarray:
        """For each ``mass`` in ``[0, total)``: the leaf whose span of the running sum holds it."""
        node = np.ones(len(mass), np.int64)
        mass = np.asarray(mass, np.float64).copy()
        while node[0] < self.leaves:
            left = self.tree[2 * node]
            right = mass >= left
            mass = np.where(right, mass - left, mass)
            node = 2 * node + right
        return node - self.leaves

    def rebuild(self, leaf_values: np.ndarray) -> None:
        self.tree[:] = 0.0
        self.tree[self.leaves:self.leaves + len(leaf_values)] = leaf_values
        node = self.leaves // 2
        while node >= 1:
            span = np.arange(node, 2 * node)
            self.tree[span] = self.tree[2 * span] + self.tree[2 * span + 1]
            node //= 2


class Priorities:
    """The priorities of a replay buffer's rows, by position."""

    def __init__(self, capacity: int, alpha: float, eps: float):
        self.alpha, self.eps = alpha, eps
        self.tree = SumTree(capacity)
        self.max_priority = 1.0  # of |TD error| + eps, before alpha

    def added(self, pos: np.ndarray) -> None:
        """Rows just written at ``pos``: the largest priority so far."""
        self.tree.set(pos, np.full(len(pos), self.max_priority ** self.alpha))

    def draw(self, filled: int, batch: int, rng: np.random.Generator,
             beta: float) -> tuple[np.ndarray, np.ndarray]:
        """``batch`` positions among the first ``filled``, and their importance weights."""
        total = self.tree.total
        edges = (np.arange(batch) + rng.random(batch)) * (total / batch)
        index = np.minimum(self.tree.find(np.minimum(edges, np.nextafter(total, 0))), filled - 1)
        p = self.tree.values(index) / total
        weight = (filled * np.maximum(p, 1e-12)) ** -beta
        return index, weight / weight.max()

    def update(self, index: np.ndarray, errors: np.ndarray) -> None:
        """The rows at ``index`` were learned from with TD errors ``errors``."""
        priority = np.abs(np.asarray(errors, np.float64)) + self.eps
        if not np.all(np.isfinite(priority)):
            raise ValueError("a prioritised replay row got a non-finite TD error")
        self.max_priority = max(self.max_priority, float(priority.max()))
        self.tree.set(index, priority ** self.alpha)

    def state_dict(self, filled: int) -> dict[str, Any]:
        return {"leaves": self.tree.values(np.arange(filled)).copy(),
                "max_priority": self.max_priority, "alpha": self.alpha}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.tree.rebuild(np.asarray(state["leaves"], np.float64))
        self.max_priority = float(state["max_priority"])


class Prioritized:
    """What a replay buffer with ``capacity`` rows and a ``len`` adds to draw by priority."""

    capacity: int
    priorities: Priorities | None = None

    def __len__(self) -> int:  # the buffer's own
        raise NotImplementedError

    def prioritize(self, alpha: float, eps: float = 1e-6) -> None:
        """Draw rows by priority from now on (a new buffer: before anything is added)."""
        self.priorities = Priorities(self.capacity, alpha, eps)

    def draw(self, batch: int, rng: np.random.Generator,
             beta: float = 1.0) -> tuple[np.ndarray, np.ndarray | None]:
        """Row indices (uniform, or by priority) and their importance weights (None: uniform)."""
        if len(self) == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        if self.priorities is None:
            return rng.integers(0, len(self), batch), None
        return self.priorities.draw(len(self), batch, rng, beta)

    def update_priorities(self, index: np.ndarray, errors: np.ndarray) -> None:
        if self.priorities is not None:
            self.priorities.update(index, errors)

    def _priorities_added(self, pos: np.ndarray) -> None:
        if self.priorities is not None:
            self.priorities.added(pos)

    def _clear_priorities(self) -> None:
        if self.priorities is not None:
            self.priorities.tree.rebuild(np.zeros(0))
            self.priorities.max_priority = 1.0

    def _priority_state(self) -> dict[str, Any]:
        return {} if self.priorities is None else {"priorities":
                                                  self.priorities.state_dict(len(self))}

    def _load_priorities(self, state: dict[str, Any]) -> None:
        if self.priorities is None:
            return
        saved = state.get("priorities")
        if saved is None:  # a uniform run resumed with prioritised replay: all rows alike
            self.priorities.tree.rebuild(np.ones(len(self)))
            return
        self.priorities.load_state_dict(saved)

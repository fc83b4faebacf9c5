"""Each trained policy's algorithm, and which policies learn.

Policies whose resolved settings (``algo`` and ``policies.<pid>.algo``) are the same learn
together in one algorithm instance, as a run without per-policy settings always does; others
get an instance each. :class:`PolicyAlgorithms` puts them behind the one :class:`Algorithm`
interface the loop drives: transitions go to the storage of the policy's algorithm, each
algorithm decides when it learns, and its metrics keep their names (with several algorithm
instances, a metric that names no policy, such as ``lr``, gets each of its policies' ids:
``lr/<pid>``). ``train.policies_to_train`` freezes the others: they act with their current
weights, are saved and restored like the rest, and are not updated.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from interplay.algos.base import Algorithm
from interplay.data.rollout import RolloutStorage
from interplay.data.storage import Storage
from interplay.run.actors import Actor
from interplay.run.transitions import Transitions


class StorageGroup:
    """The storages of several algorithms, as one: each policy's transitions go to its algorithm's."""

    def __init__(self, parts: list[Storage | None], owner: dict[str, int]):
        self.parts = parts
        self.owner = owner
        self.saved = any(p is not None and p.saved for p in parts)

    def add(self, pid: str, batch: Transitions) -> None:
        part = self.parts[self.owner[pid]] if pid in self.owner else None
        if part is not None:
            part.add(pid, batch)

    def end_step(self, env_steps: int) -> None:
        for part in self.parts:
            if part is not None:
                part.end_step(env_steps)

    def state_dict(self) -> dict[str, Any]:
        return {"parts": [p.state_dict() if p is not None and p.saved else None
                          for p in self.parts]}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        saved = (state or {}).get("parts") or [None] * len(self.parts)
        for part, s in zip(self.parts, saved, strict=True):
            if part is not None:
                part.load_state_dict(s)


class PolicyAlgorithms(Algorithm):
    """The algorithms of disjoint sets of trained policies, driven as one algorithm;
    :meth:`of` names the one that trains a policy.

    With one algorithm instance it is that instance, unchanged: its storage, state and
    metrics are its own, and attributes not found here are its.
    """

    def __init__(self, parts: list[tuple[Algorithm, list[str]]], training: Iterable[str]):
        self.parts = parts
        self.owner = {pid: i for i, (_, pids) in enumerate(parts) for pid in pids}
        self.gauges = frozenset().union(*(type(a).gauges for a, _ in parts))  # type: ignore[misc]
        self.storage: StorageGroup | Storage | None = None
        self._due: list[int] = []
        self.training: set[str] = set()
        self.set_training(training)

    def __getattr__(self, name: str) -> Any:
        parts = self.__dict__.get("parts")
        if parts is not None and len(parts) == 1:
            return getattr(parts[0][0], name)
        raise AttributeError(name)

    @property
    def name(self) -> str:  # type: ignore[override]
        """The algorithm's name; with several algorithms, theirs joined by ``+``."""
        return "+".join(dict.fromkeys(type(a).name for a, _ in self.parts))

    @property
    def settings(self) -> Any:  # type: ignore[override]
        return self.parts[0][0].settings

    @property
    def policies_to_train(self) -> list[str]:
        return sorted(self.training)

    def set_training(self, pids: Iterable[str]) -> None:
        """Train ``pids`` from now on; every other trained policy keeps its weights. An algorithm
        that starts training again begins a fresh on-policy rollout (what it stored while
        frozen is not learned from)."""
        pids = set(pids)
        unknown = pids - set(self.owner)
        if unknown:
            raise ValueError(f"no trained policy is called {sorted(unknown)[0]!r}; trained "
                             f"policies are {sorted(self.owner)}")
        for i, (algo, own) in enumerate(self.parts):
            was_frozen = set(own) <= algo.frozen
            algo.frozen = set(own) - pids
            part = self._part_storage(i)
            if was_frozen and not set(own) <= algo.frozen and isinstance(part, RolloutStorage):
                part.clear()
        self.training = pids

    def _part_storage(self, i: int) -> Any:
        if isinstance(self.storage, StorageGroup):
            return self.storage.parts[i]
        return self.storage

    # -- the Algorithm interface ----------------------------------------------------------
    def of(self, pid: str) -> Algorithm:
        """The algorithm that trains ``pid``."""
        return self.parts[self.owner[pid]][0]

    def actor(self, pid: str) -> Actor:
        return self.of(pid).actor(pid)

    def make_storage(self, num_envs: int) -> StorageGroup | Storage | None:
        made = [algo.make_storage(num_envs) for algo, _ in self.parts]
        if len(made) == 1:
            self.storage = made[0]
        elif any(m is not None for m in made):
            self.storage = StorageGroup(made, self.owner)
        return self.storage

    def collect(self, pid: str, batch: Transitions) -> None:
        if pid in self.owner:
            self.of(pid).collect(pid, batch)

    def ready(self, storage: Any, env_steps: int) -> bool:
        self._due = []
        for i, (algo, own) in enumerate(self.parts):
            part = storage.parts[i] if isinstance(storage, StorageGroup) else storage
            if algo.ready(part, env_steps) and not set(own) <= algo.frozen:
                self._due.append(i)
            elif (set(own) <= algo.frozen and isinstance(part, RolloutStorage)
                  and algo.rollout_full(part)):
                part.clear()  # a frozen algorithm's rollout is never learned from
        return bool(self._due)

    def steps_to_update(self, storage: Any) -> int | None:
        """The nearest of the algorithms' next updates; None when any cannot say."""
        due = []
        for i, (algo, _) in enumerate(self.parts):
            part = storage.parts[i] if isinstance(storage, StorageGroup) else storage
            n = algo.steps_to_update(part)
            if n is None:
                return None
            due.append(n)
        return min(due)

    def update(self, storage: Any) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for i in self._due:
            algo, own = self.parts[i]
            part = storage.parts[i] if isinstance(storage, StorageGroup) else storage
            for key, value in algo.update(part).items():
                if len(self.parts) == 1 or "/" in key:
                    metrics[key] = value
                else:
                    metrics.update({f"{key}/{pid}": value for pid in own})
        self._due = []
        return metrics

    def state_dict(self) -> dict[str, Any]:
        if len(self.parts) == 1:
            return self.parts[0][0].state_dict()
        # the key keeps its old name, so checkpoints written before still load
        return {"learners": [algo.state_dict() for algo, _ in self.parts]}

    def frozen_state(self) -> dict[str, Any]:
        if len(self.parts) == 1:
            return self.parts[0][0].frozen_state()
        return {"learners": [algo.frozen_state() for algo, _ in self.parts]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if len(self.parts) == 1:
            self.parts[0][0].load_state_dict(state)
            return
        for (algo, _), s in zip(self.parts, state["learners"], strict=True):
            algo.load_state_dict(s)

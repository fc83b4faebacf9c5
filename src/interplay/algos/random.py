"""``algo.name: random``: every trainable policy acts uniformly over its legal actions."""

from __future__ import annotations

from interplay.algos.base import Algorithm, register
from interplay.run.actors import Actor, RandomActor
from interplay.seeding import rng_for


@register
class RandomAlgorithm(Algorithm):
    name = "random"
    action_kinds = Algorithm.action_kinds | {"composite"}

    def actor(self, pid: str) -> Actor:
        return RandomActor(self.specs[pid], rng_for(self.seed, "random", pid))

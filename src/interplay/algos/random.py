"""``algo.name: random``: every trainable policy acts uniformly over its legal actions."""

from __future__ import annotations

from interplay.actors import Actor, RandomActor
from interplay.algos.base import Algorithm, register, rng_for


@register
class RandomAlgorithm(Algorithm):
    name = "random"

    def actor(self, pid: str) -> Actor:
        return RandomActor(self.specs[pid], rng_for(self.seed, "random", pid))

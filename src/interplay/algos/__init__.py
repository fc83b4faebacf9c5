"""Algorithms register themselves on import; importing this package loads them all."""

from interplay.algos import a2c, dqn, maddpg, ppo, qmix, random, sac  # noqa: F401
from interplay.algos.base import REGISTRY, Algorithm, algorithm_class, register

__all__ = ["REGISTRY", "Algorithm", "algorithm_class", "register"]

"""The env id ``interplay.envs.swarm``: :mod:`interplay.envs.toy.swarm` under its short name."""

from interplay.envs.toy.swarm import Swarm, parallel_env

__all__ = ["Swarm", "parallel_env"]

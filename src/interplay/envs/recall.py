"""The env id ``interplay.envs.recall``: :mod:`interplay.envs.toy.recall` under its short name."""

from interplay.envs.toy.recall import Recall, parallel_env

__all__ = ["Recall", "parallel_env"]

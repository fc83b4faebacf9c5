"""The env id ``interplay.envs.aim``: :mod:`interplay.envs.toy.aim` under its short name."""

from interplay.envs.toy.aim import Aim, parallel_env

__all__ = ["Aim", "parallel_env"]

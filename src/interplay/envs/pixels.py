"""The env id ``interplay.envs.pixels``: :mod:`interplay.envs.toy.pixels` under its short name."""

from interplay.envs.toy.pixels import ColorMatch, parallel_env

__all__ = ["ColorMatch", "parallel_env"]

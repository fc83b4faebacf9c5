"""The env id ``interplay.envs.color_key``: :mod:`interplay.envs.toy.color_key` under its short
name."""

from interplay.envs.toy.color_key import ColorKey, parallel_env

__all__ = ["ColorKey", "parallel_env"]

"""The players ``interplay.envs.connect_four:one_ply`` and ``:two_ply``: those of
:mod:`interplay.envs.toy.connect_four` under their short names."""

from interplay.envs.toy.connect_four import one_ply, two_ply

__all__ = ["one_ply", "two_ply"]

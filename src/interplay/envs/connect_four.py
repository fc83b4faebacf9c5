"""The players ``interplay.envs.connect_four:one_ply``, ``:two_ply``, ``:center_one_ply`` and
``:center_two_ply``, and the teachers ``:forced``, ``:tactics``, ``:threats`` and
``:lookahead``: those of :mod:`interplay.envs.toy.connect_four` under their short names."""

from interplay.envs.toy.connect_four import (
    center_one_ply,
    center_two_ply,
    forced,
    lookahead,
    one_ply,
    tactics,
    threats,
    two_ply,
)

__all__ = ["center_one_ply", "center_two_ply", "forced", "lookahead", "one_ply", "tactics",
           "threats", "two_ply"]

"""Tiny games that ship with interplay, for tests, checks, benchmarks and demos.

The scripted games (``interplay.envs.toy:shifting_crowd`` and the like) are named from here;
``swarm``, ``recall``, ``pixels``, ``color_key``, ``aim`` and ``connect_four`` keep their short env ids
(``interplay.envs.swarm``) through modules of those names beside this folder.
"""

from interplay.envs.toy.games import (
    HiddenGoal,
    Move,
    ScriptedTurnGame,
    SharedSpaces,
    ShiftingCrowd,
    cut_at_max_cycles,
    hidden_goal,
    scripted_turn_game,
    shifting_crowd,
)
from interplay.envs.toy.recall import TurnRecall, turn_recall

__all__ = ["HiddenGoal", "Move", "ScriptedTurnGame", "SharedSpaces", "ShiftingCrowd",
           "TurnRecall", "cut_at_max_cycles", "hidden_goal", "scripted_turn_game",
           "shifting_crowd", "turn_recall"]

"""An algorithm defined outside the package, named in configs as ``custom_algo:Greedy``."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from interplay import Algorithm, AlgoSettings
from interplay.run.actors import ActBatch


class GreedySettings(AlgoSettings):
    action: int = Field(0, ge=0)
    """The action every agent takes (where it is legal)."""


class _Fixed:
    squashed = False  # the Actor protocol: its actions are the env's own
    wants_env_obs = False

    def __init__(self, action: int):
        self.action = action

    def act(self, batch: ActBatch, explore: bool = True):
        actions = np.full(len(batch.obs), self.action)
        if batch.mask is not None:  # where the action is illegal, the first legal one
            illegal = ~batch.mask[:, self.action]
            actions[illegal] = batch.mask[illegal].argmax(1)
        return actions, {}


class Greedy(Algorithm):
    name = "greedy"
    Settings = GreedySettings
    action_kinds = frozenset({"discrete"})

    def actor(self, pid: str):
        return _Fixed(self.settings.action)

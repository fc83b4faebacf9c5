"""Envs that break a rule on purpose, for the checker's tests."""

from __future__ import annotations

import numpy as np

from interplay.envs.toy import ShiftingCrowd


class NaNObs(ShiftingCrowd):
    def _obs(self, agent):
        obs = super()._obs(agent)
        if self.t == 3:
            obs[0] = np.nan
        return obs


def nan_obs_env():
    return NaNObs()

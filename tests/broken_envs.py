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


class MixedSpaces(ShiftingCrowd):
    """Heterogeneous agents: Box, MultiDiscrete and Discrete actions (the last masked via info),
    and a Dict observation; every action is checked against its space."""

    def __init__(self):
        from gymnasium import spaces

        super().__init__({"mover_0": (0, 99), "voter_0": (0, 99), "picker_0": (0, 99)}, max_steps=12)
        self._spaces = {
            "mover_0": (spaces.Box(-1, 1, (3,), np.float32), spaces.Box(-2.0, 0.5, (2,), np.float32)),
            "voter_0": (spaces.Dict({"pos": spaces.Box(-9, 9, (2,), np.float32), "flag": spaces.Discrete(3)}),
                        spaces.MultiDiscrete([3, 4])),
            "picker_0": (spaces.Box(-1e6, 1e6, (2,), np.float32), spaces.Discrete(5, start=1)),
        }
        self.legal = {}

    def observation_space(self, agent):
        return self._spaces[agent][0]

    def action_space(self, agent):
        return self._spaces[agent][1]

    def _obs(self, agent):
        if agent == "mover_0":
            return np.full(3, 0.5, np.float32)
        if agent == "voter_0":
            return {"pos": np.zeros(2, np.float32), "flag": self.t % 3}
        return super()._obs(agent)

    def _infos(self):
        legal = np.zeros(5, np.int8)
        legal[[self.t % 5, (self.t + 2) % 5]] = 1
        self.legal = legal
        return {"mover_0": {}, "voter_0": {}, "picker_0": {"action_mask": legal}}

    def reset(self, seed=None, options=None):
        obs, _ = super().reset(seed, options)
        return obs, self._infos()

    def step(self, actions):
        for a, act in actions.items():
            if not self.action_space(a).contains(np.asarray(act, dtype=self.action_space(a).dtype)
                                                  if a != "picker_0" else act):
                raise ValueError(f"{a}: action {act!r} outside {self.action_space(a)}")
        if not self.legal[actions["picker_0"] - 1]:
            raise ValueError(f"picker_0: illegal action {actions['picker_0']} for mask {self.legal}")
        self.t_actions = actions
        obs, rew, term, trunc, _ = super().step({a: 1 for a in actions})
        return obs, rew, term, trunc, self._infos()


def mixed_spaces():
    return MixedSpaces()

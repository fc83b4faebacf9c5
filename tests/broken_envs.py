"""Envs that break a rule on purpose, for the checker's tests."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from interplay.envs.toy import Move, ScriptedTurnGame, ShiftingCrowd


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


class WrongObs(ShiftingCrowd):
    """A Parallel env whose agent ``a_1`` sees ``bad`` instead of its observation at step ``at``
    (at 0: from reset) of its episode number ``episode`` (counted from 0) and later ones."""

    def __init__(self, at=3, bad="short", max_steps=10, episode=0):
        super().__init__({"a_0": (0, 99), "a_1": (0, 99)}, max_steps=max_steps)
        self.at, self.bad, self.episode, self.resets = at, bad, episode, -1

    def reset(self, seed=None, options=None):
        self.resets += 1
        return super().reset(seed, options)

    def _obs(self, agent):
        obs = super()._obs(agent)
        if agent != "a_1" or self.t != self.at or self.resets < self.episode:
            return obs
        return {"short": obs[:1], "long": np.zeros(5, np.float32), "nested": obs[None, :],
                "scalar": np.float32(1.0), "text": np.array(["a", "b"]), "none": None,
                "list3": [1.0, 2.0, 3.0]}[self.bad]


def wrong_obs(**kwargs):
    return WrongObs(**kwargs)


class WrongAECObs(ScriptedTurnGame):
    """An AEC turn game whose observation is 2 wide instead of 3 from move ``at`` on; its
    Box space is 2-D when ``image`` (then the bad observation is transposed, the same size)."""

    def __init__(self, at=4, image=False):
        super().__init__(n_agents=2, plan=[Move()] * 50, masked=False)
        self.at, self.image = at, image
        if image:
            self._obs_space = spaces.Box(-1.0, 1e6, (2, 3), np.float32)

    def observe(self, agent):
        obs = super().observe(agent)
        if self.image:
            obs = np.stack([obs, obs])
            return obs.T if self.moves >= self.at else obs
        return obs[:2] if self.moves >= self.at else obs


def wrong_aec_obs(**kwargs):
    return WrongAECObs(**kwargs)

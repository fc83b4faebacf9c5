"""Envs that break a rule on purpose, for the checker's tests."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from interplay.envs.toy import Move, ScriptedTurnGame, ShiftingCrowd
from interplay.envs.toy.pixels import ColorMatch


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
                "list3": [1.0, 2.0, 3.0], "dict": {"x": obs},
                "objects": np.array([1.0, None], dtype=object), "nan_text": np.array(["nan", "1"]),
                "complex": obs + 1j, "none_list": [None, 1.0]}[self.bad]


class WrongTypedObs(WrongObs):
    """``WrongObs`` with a Dict, uint8 image or Discrete observation space (``space``)."""

    def __init__(self, space="dict", **kwargs):
        super().__init__(**kwargs)
        self._obs_space = {
            "dict": spaces.Dict({"pos": spaces.Box(-9, 9, (2,), np.float32), "flag": spaces.Discrete(3)}),
            "image": spaces.Box(0, 255, (4, 4, 3), np.uint8),
            "discrete": spaces.Discrete(5),
        }[space]

    def _obs(self, agent):
        good = {"Dict": {"pos": np.zeros(2, np.float32), "flag": 1},
                "Box": np.zeros((4, 4, 3), np.uint8), "Discrete": 2}[type(self._obs_space).__name__]
        if agent != "a_1" or self.t != self.at:
            return good
        return {"no_flag": {"pos": np.zeros(2, np.float32)},
                "extra_key": {"pos": np.zeros(2, np.float32), "flag": 1, "speed": 3.0},
                "short_pos": {"pos": np.zeros(1, np.float32), "flag": 1},
                "float_frame": np.full((4, 4, 3), 300.5), "negative_frame": np.full((4, 4, 3), -5),
                "fraction": 1.5}[self.bad]


def wrong_typed_obs(**kwargs):
    return WrongTypedObs(**kwargs)


def wrong_obs(**kwargs):
    return WrongObs(**kwargs)


class WrongAECObs(ScriptedTurnGame):
    """An AEC turn game whose observation is 2 wide instead of 3 from move ``at`` on; its
    Box space is 2-D when ``image`` (then the bad observation is transposed, the same size).
    With ``masked`` its observations are Dicts with an action_mask, and from move ``at`` on
    they lose the mask (``bad: nomask``) or are a bare array (``bad: array``)."""

    def __init__(self, at=4, image=False, masked=False, bad="short"):
        super().__init__(n_agents=2, plan=[Move()] * 50, masked=masked)
        self.at, self.image, self.bad = at, image, bad
        if image:
            self._obs_space = spaces.Box(-1.0, 1e6, (2, 3), np.float32)

    def observe(self, agent):
        obs = super().observe(agent)
        if self.masked:
            if self.moves < self.at:
                return obs
            return {"observation": obs["observation"]} if self.bad == "nomask" else obs["observation"]
        if self.image:
            obs = np.stack([obs, obs])
            return obs.T if self.moves >= self.at else obs
        return obs[:2] if self.moves >= self.at else obs


def wrong_aec_obs(**kwargs):
    return WrongAECObs(**kwargs)


class LateJoiner(ScriptedTurnGame):
    """A valid AEC turn game in which ``player_2`` joins after ``join`` moves."""

    def __init__(self, join=2):
        super().__init__(n_agents=3, plan=[Move(rewards={"player_0": 1.0})] * 12, masked=True)
        self.join = join

    def reset(self, seed=None, options=None):
        super().reset(seed, options)
        self.agents = self.possible_agents[:2]
        for d in (self.rewards, self._cumulative_rewards, self.terminations, self.truncations,
                  self.infos):
            d.pop("player_2")

    def step(self, action):
        super().step(action)
        late = self.possible_agents[2]
        if self.moves == self.join and late not in self.agents and self.agents:
            self.agents.append(late)
            self.rewards[late] = self._cumulative_rewards[late] = 0.0
            self.terminations[late] = self.truncations[late] = False
            self.infos[late] = {}


def late_joiner(**kwargs):
    return LateJoiner(**kwargs)


class QuietArrivals(ShiftingCrowd):
    """A valid Parallel env whose arriving agents come with an observation and info only (no
    reward or flags in the step that brings them), and that needs an action from every agent in
    ``agents``."""

    def step(self, actions):
        before = set(self.agents)
        obs, rew, term, trunc, infos = super().step(actions)
        for a in set(self.agents) - before:
            for d in (rew, term, trunc):
                d.pop(a, None)
        return obs, rew, term, trunc, infos


def quiet_arrivals(**kwargs):
    return QuietArrivals(**kwargs)


class InfoMasked(ShiftingCrowd):
    """A Parallel env that keeps each agent's legal actions in ``info["action_mask"]`` (length
    ``width``; the action space has 3) and raises on an illegal action, as many envs do."""

    def __init__(self, width=3):
        super().__init__({"a_0": (0, 99), "a_1": (0, 99)}, max_steps=8)
        self.width = width
        self._act_space = spaces.Discrete(3)

    def _infos(self, agents):
        self.legal = {a: np.eye(self.width, dtype=np.int8)[(self.t + i) % self.width]
                      for i, a in enumerate(agents)}
        return {a: {"action_mask": m} for a, m in self.legal.items()}

    def reset(self, seed=None, options=None):
        obs, _ = super().reset(seed, options)
        return obs, self._infos(obs)

    def step(self, actions):
        for a, act in actions.items():
            if self.width == 3 and not self.legal[a][int(act)]:
                raise ValueError(f"{a}: illegal action {act}")
        obs, rew, term, trunc, _ = super().step(actions)
        return obs, rew, term, trunc, self._infos(obs)


def info_masked(**kwargs):
    return InfoMasked(**kwargs)


class LongMask(ScriptedTurnGame):
    """An AEC game whose action_mask has one entry more than its 3 actions, in the space and
    in every observation."""

    def __init__(self):
        super().__init__(n_agents=2, plan=[Move()] * 6)
        self._obs_space = spaces.Dict({"observation": spaces.Box(-1.0, 1e6, (3,), np.float32),
                                       "action_mask": spaces.Box(0, 1, (4,), np.int8)})

    def _mask(self):
        return np.ones(4, np.int8)


def long_mask():
    return LongMask()


class Chatty(ShiftingCrowd):
    """A valid Parallel env that warns about rendering at every step."""

    def step(self, actions):
        import warnings

        warnings.warn("render_mode is None: nothing will be drawn", UserWarning, stacklevel=2)
        return super().step(actions)


def chatty():
    return Chatty()


class ObjectInfo(ShiftingCrowd):
    """Valid, but its infos hold a NumPy array of Python objects (names, some missing)."""

    def __init__(self):
        super().__init__({"a_0": (0, 99), "a_1": (0, 99)}, max_steps=8)

    def _infos(self, agents):
        return {a: {"names": np.array([a, None, self.t], dtype=object)} for a in agents}

    def reset(self, seed=None, options=None):
        obs, _ = super().reset(seed, options)
        return obs, self._infos(obs)

    def step(self, actions):
        obs, rewards, terms, truncs, _ = super().step(actions)
        return obs, rewards, terms, truncs, self._infos(obs)


def object_info():
    return ObjectInfo()


class UndrawnFrames(ColorMatch):
    """Image observations that show the same blank picture at every step, as pistonball_v6's
    do without a render mode; ``drawn=True`` gives each step's own frames."""

    def __init__(self, drawn: bool = False):
        super().__init__(max_cycles=8)
        self.drawn = drawn
        self._blank = np.full((self.size, self.size, 3), 30, np.uint8)

    def _draw(self):
        frames = super()._draw()
        return frames if self.drawn else {a: self._blank.copy() for a in frames}


def undrawn_frames(**kwargs):
    return UndrawnFrames(**kwargs)

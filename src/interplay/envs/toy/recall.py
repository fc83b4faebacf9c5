"""``Recall``: a memory task. A cue is shown at the first step only; recalling it pays at the last.
``TurnRecall`` is the same task with the players taking turns (an AEC env).

Each agent gets its own cue, one of ``n_cues``, seen as a one-hot vector at the first step and
as zeros after it. For ``delay`` steps nothing happens (actions are ignored); then the
observation's last entry says "now", and the agent's action is its guess: 1 if it names its
cue, 0 if not, and the episode ends. A policy without memory sees the same thing at the last
step whatever the cue, so it can do no better than chance (``1 / n_cues``).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from interplay.envs.toy.games import SharedSpaces, start_move, start_turns


class Recall(SharedSpaces):
    metadata = {"name": "recall_v0", "render_modes": []}

    def __init__(self, n_agents: int = 2, n_cues: int = 4, delay: int = 5):
        if n_agents < 1 or n_cues < 2 or delay < 0:
            raise ValueError(f"need n_agents >= 1, n_cues >= 2 and delay >= 0; got "
                             f"{n_agents}, {n_cues}, {delay}")
        super().__init__([f"agent_{i}" for i in range(n_agents)],
                         spaces.Box(0.0, 1.0, (n_cues + 1,), np.float32), spaces.Discrete(n_cues))
        self.n_cues, self.delay = n_cues, delay

    def _observe(self) -> dict[str, np.ndarray]:
        out = {}
        for i, a in enumerate(self.agents):
            obs = np.zeros(self.n_cues + 1, np.float32)
            if self.t == 0:
                obs[self.cues[i]] = 1.0
            if self.t == self.delay:
                obs[-1] = 1.0
            out[a] = obs
        return out

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        self.cues = self._rng.integers(0, self.n_cues, len(self.agents))
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions: dict):
        last = self.t == self.delay
        rewards = {a: float(last and int(actions[a]) == int(self.cues[i]))
                   for i, a in enumerate(self.agents)}
        self.t += 1
        obs = self._observe()
        terms = dict.fromkeys(self.agents, last)
        truncs = dict.fromkeys(self.agents, False)
        infos: dict[str, dict] = {a: {} for a in self.agents}
        if last:
            self.agents = []
        return obs, rewards, terms, truncs, infos


def parallel_env(**kwargs) -> Recall:
    return Recall(**kwargs)


class TurnRecall(AECEnv):
    """``Recall`` taking turns: players move in rotation, each remembering its own cue.

    A player sees its cue (one-hot, one of ``n_cues``) at its first turn and zeros after it;
    for ``delay`` more turns of its own nothing happens; at its last turn the observation's
    last entry says "now" and its action is its guess, paid 1 if it names the cue. Every
    player is terminated once the last one has guessed. Between two turns of a player the
    others move, so what it must remember spans its own turns, not the env's steps; a policy
    without memory stays at chance (``1 / n_cues``).
    """

    agent_selection: str  # start_turns sets it, as every step after

    metadata = {"name": "turn_recall_v0", "render_modes": []}

    def __init__(self, n_agents: int = 2, n_cues: int = 4, delay: int = 3):
        super().__init__()
        if n_agents < 1 or n_cues < 2 or delay < 0:
            raise ValueError(f"need n_agents >= 1, n_cues >= 2 and delay >= 0; got "
                             f"{n_agents}, {n_cues}, {delay}")
        self.possible_agents = [f"player_{i}" for i in range(n_agents)]
        self.n_cues, self.delay = n_cues, delay
        self._obs_space = spaces.Box(0.0, 1.0, (n_cues + 1,), np.float32)
        self._act_space = spaces.Discrete(n_cues)
        self._rng = np.random.default_rng()

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space

    def observe(self, agent: str) -> np.ndarray:
        i = self.possible_agents.index(agent)
        obs = np.zeros(self.n_cues + 1, np.float32)
        if self.turns[i] == 0:
            obs[self.cues[i]] = 1.0
        if self.turns[i] == self.delay:
            obs[-1] = 1.0
        return obs

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.cues = self._rng.integers(0, self.n_cues, len(self.agents))
        self.turns = np.zeros(len(self.agents), np.int64)  # each player's turns taken
        start_turns(self)

    def step(self, action) -> None:
        agent = start_move(self, action)
        if agent is None:
            return
        i = self.possible_agents.index(agent)
        if self.turns[i] == self.delay:
            self.rewards[agent] = float(int(action) == int(self.cues[i]))
        self.turns[i] += 1
        if i == len(self.agents) - 1 and self.turns[i] > self.delay:
            for a in self.agents:
                self.terminations[a] = True
        self.agent_selection = self.agents[(i + 1) % len(self.agents)]
        self._accumulate_rewards()


def turn_recall(**kwargs) -> TurnRecall:
    return TurnRecall(**kwargs)

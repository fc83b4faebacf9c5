"""A two-player game whose outcomes are known, and scripted players for it."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from interplay.envs.toy.games import start_move, start_turns


class FirstToClaim(AECEnv):
    """Players alternate; action 1 claims the game (the claimer gets +1, the other -1), action
    0 passes. After ``rounds`` passes by each player the game is a draw. The observation is the
    number of moves so far, one-hot."""

    metadata = {"name": "first_to_claim", "render_modes": []}

    def __init__(self, rounds: int = 3):
        super().__init__()
        self.possible_agents = ["player_0", "player_1"]
        self.rounds = rounds
        self._obs_space = spaces.Dict({
            "observation": spaces.Box(0.0, 1.0, (2 * rounds,), np.float32),
            "action_mask": spaces.Box(0, 1, (2,), np.int8),
        })

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(2)

    def observe(self, agent: str):
        obs = np.zeros(2 * self.rounds, np.float32)
        obs[min(self.moves, 2 * self.rounds - 1)] = 1.0
        return {"observation": obs, "action_mask": np.ones(2, np.int8)}

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.moves = 0
        start_turns(self)

    def step(self, action) -> None:
        agent = start_move(self, action)
        if agent is None:
            return
        other = self.agents[1 - self.agents.index(agent)]
        self.moves += 1
        if int(action) == 1:
            self.rewards[agent], self.rewards[other] = 1.0, -1.0
            self.terminations = dict.fromkeys(self.agents, True)
        elif self.moves >= 2 * self.rounds:
            self.terminations = dict.fromkeys(self.agents, True)
        self._accumulate_rewards()
        self.agent_selection = other


def first_to_claim(**kwargs) -> FirstToClaim:
    return FirstToClaim(**kwargs)


def always_claim(observation, agent_id: str) -> int:
    return 1


def always_pass(observation, agent_id: str) -> int:
    return 0

"""A small PettingZoo env of your own, with the pieces a config can name (docs/tutorial_own_env.md).

Two hunters and a runner move on a square grid (stay, up, down, left, right). When a hunter
steps onto the runner's cell the hunters get 1 each, the runner -1, and the episode ends;
every other step costs each hunter 0.01. Each agent sees its own position and every other
agent's position relative to its own, scaled to [-1, 1].

Configs name what this module holds with ``module:function`` (run with ``PYTHONPATH=examples``
or from this folder): ``env.id: chase`` (its ``parallel_env``), scripted policies
``fn: chase:flee`` and ``chase:pursue``, ``train.policy_mapping_fn: chase:policy_of`` and
``train.callbacks: [chase:CatchStats]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

import interplay

MOVES = np.array([[0, 0], [0, 1], [0, -1], [-1, 0], [1, 0]])  # stay, up, down, left, right


class Chase(ParallelEnv):
    metadata = {"name": "chase_v0", "render_modes": []}

    def __init__(self, size: int = 7, max_cycles: int = 30):
        if size < 2 or max_cycles < 1:
            raise ValueError(f"need size >= 2 and max_cycles >= 1, got {size} and {max_cycles}")
        self.size, self.max_cycles = size, max_cycles
        self.possible_agents = ["hunter_0", "hunter_1", "runner_0"]
        n = len(self.possible_agents)
        self._obs = spaces.Box(-1.0, 1.0, (2 * n,), np.float32)
        self._act = spaces.Discrete(len(MOVES))
        self._rng = np.random.default_rng()
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs

    def action_space(self, agent: str) -> spaces.Space:
        return self._act

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        cells = self._rng.choice(self.size * self.size, len(self.agents), replace=False)
        self.pos = np.stack([cells // self.size, cells % self.size], axis=1)
        self.t = 0
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]):
        for i, agent in enumerate(self.agents):
            self.pos[i] = np.clip(self.pos[i] + MOVES[int(actions[agent])], 0, self.size - 1)
        self.t += 1
        caught = bool((self.pos[:2] == self.pos[2]).all(axis=1).any())
        rewards = {"hunter_0": 1.0 if caught else -0.01, "hunter_1": 1.0 if caught else -0.01,
                   "runner_0": -1.0 if caught else 0.0}
        terminated = dict.fromkeys(self.agents, caught)
        truncated = dict.fromkeys(self.agents, not caught and self.t >= self.max_cycles)
        infos = {a: {"distance": self._distance()} for a in self.agents}
        obs = self._observe()
        if caught or self.t >= self.max_cycles:
            self.agents = []
        return obs, rewards, terminated, truncated, infos

    def _observe(self) -> dict[str, np.ndarray]:
        scale = self.size - 1
        return {a: np.concatenate([self.pos[i] / scale, *((self.pos[j] - self.pos[i]) / scale
                                    for j in range(len(self.pos)) if j != i)]).astype(np.float32)
                for i, a in enumerate(self.possible_agents)}

    def _distance(self) -> int:
        """Steps between the runner and its nearest hunter."""
        return int(np.abs(self.pos[:2] - self.pos[2]).sum(axis=1).min())


def parallel_env(**kwargs: Any) -> Chase:
    """What ``env.id: chase`` builds (``env.kwargs`` are passed on)."""
    return Chase(**kwargs)


# -- scripted policies: fn(observation, agent_id) -> action -----------------------------------
def _toward(offset: np.ndarray) -> int:
    """The move that shrinks the larger coordinate of ``offset`` (0 when it is zero)."""
    if not offset.any():
        return 0
    axis = int(np.argmax(np.abs(offset)))
    return (1 if offset[1] > 0 else 2) if axis == 1 else (4 if offset[0] > 0 else 3)


def pursue(observation: np.ndarray, agent_id: str) -> int:
    """A hunter that walks straight at the runner (the last offset in its observation)."""
    return _toward(observation[-2:])


def flee(observation: np.ndarray, agent_id: str) -> int:
    """A runner that steps away from its nearest hunter, along a wall when it must."""
    offsets = observation[2:].reshape(-1, 2)
    nearest = offsets[np.argmin(np.abs(offsets).sum(axis=1))]
    move = _toward(-nearest)
    here = observation[:2] + MOVES[move] * 1e-3  # against a wall: go along it instead
    return move if (0 <= here).all() and (here <= 1).all() else (1 if move in (3, 4) else 4)


# -- a policy mapping function, RLlib style ---------------------------------------------------
def policy_of(agent_id: str, *args: Any, **kwargs: Any) -> str:
    """``hunter_0``, ``hunter_1`` -> ``hunters``; ``runner_0`` -> ``runner``."""
    return "hunters" if agent_id.startswith("hunter") else "runner"


# -- custom metrics ---------------------------------------------------------------------------
class CatchStats(interplay.Callbacks):
    """Per episode: whether the runner was caught, and how far it was at the end."""

    def on_episode_end(self, *, episode, env_index, runner):
        end = episode.final["runner_0"]
        episode.add_metric("custom/caught", float(end.terminated), reduce="mean")
        episode.add_metric("custom/final_distance", end.info.get("distance", 0), reduce="mean")

"""``Recall``: a memory task. A cue is shown at the first step only; recalling it pays at the last.

Each agent gets its own cue, one of ``n_cues``, seen as a one-hot vector at the first step and
as zeros after it. For ``delay`` steps nothing happens (actions are ignored); then the
observation's last entry says "now", and the agent's action is its guess: 1 if it names its
cue, 0 if not, and the episode ends. A policy without memory sees the same thing at the last
step whatever the cue, so it can do no better than chance (``1 / n_cues``).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from interplay.envs.toy.games import SharedSpaces


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

"""Tiny deterministic games that ship with interplay, for tests, checks and demos.

``ScriptedTurnGame`` is an AEC env driven by a plan: who moves, who is paid what on each move
(rewards land on any agent, not just the mover), who is terminated when, and where the env
truncates. ``ShiftingCrowd`` is a Parallel env whose agents appear and leave mid-episode.
Both are pure functions of their arguments, so exact returns are known in advance.
``HiddenGoal`` is a cooperative Parallel env whose global state (``state()``) holds what no
agent observes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv


@dataclass
class Move:
    """What happens when the agent whose turn it is moves."""

    rewards: dict[str, float] = field(default_factory=dict)  # paid to these agents (if live)
    terminate: Sequence[str] = ()  # these live agents are terminated by this move
    skip: int = 0  # the next mover is this many live agents further along the rotation


class SharedSpaces(ParallelEnv):
    """A Parallel env whose agents all have one observation space and one action space, and
    that draws from its own generator (``_rng``, reseeded by ``reset(seed)``)."""

    def __init__(self, agents: list[str], obs_space: spaces.Space, act_space: spaces.Space):
        self.possible_agents = agents
        self._obs_space, self._act_space = obs_space, act_space
        self._rng = np.random.default_rng()
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space


class ScriptedTurnGame(AECEnv):
    """Agents move in rotation; each move follows the next entry of ``plan``.

    When the plan runs out every live agent is terminated; at ``truncate_after`` moves every
    live agent is truncated. Observations are ``[move count, own index, alive]`` plus an
    ``action_mask`` allowing actions ``0 .. n_actions-1`` except one that rotates.
    """

    agent_selection: str  # start_turns sets it, as every step after

    metadata = {"name": "scripted_turn_game", "render_modes": []}

    def __init__(self, n_agents: int = 3, plan: Sequence[Move] = (), truncate_after: int | None = None,
                 n_actions: int = 3, masked: bool = True):
        super().__init__()
        self.possible_agents = [f"player_{i}" for i in range(n_agents)]
        self.plan = list(plan)
        self.truncate_after = truncate_after
        self.n_actions = n_actions
        self.masked = masked
        inner = spaces.Box(-1.0, 1e6, (3,), np.float32)
        if masked:
            self._obs_space = spaces.Dict({
                "observation": inner,
                "action_mask": spaces.Box(0, 1, (n_actions,), np.int8),
            })
        else:
            self._obs_space = inner
        self._act_space = spaces.Discrete(n_actions)
        self.illegal_moves = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space

    def _mask(self) -> np.ndarray:
        m = np.ones(self.n_actions, np.int8)
        if self.n_actions > 1:
            m[self.moves % self.n_actions] = 0
        return m

    def observe(self, agent: str):
        i = self.possible_agents.index(agent)
        alive = agent in self.agents and not (self.terminations.get(agent) or self.truncations.get(agent))
        obs = np.array([self.moves, i, float(alive)], np.float32)
        if not self.masked:
            return obs
        return {"observation": obs, "action_mask": self._mask()}

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.agents = list(self.possible_agents)
        self.moves = 0
        start_turns(self)

    def _live(self) -> list[str]:
        return [a for a in self.agents if not (self.terminations[a] or self.truncations[a])]

    def step(self, action) -> None:
        agent = start_move(self, action)
        if agent is None:
            return
        if self.masked and not self._mask()[int(action)]:
            self.illegal_moves += 1
        move = self.plan[self.moves] if self.moves < len(self.plan) else None
        self.moves += 1
        live = self._live()
        if move is None:
            for a in live:
                self.terminations[a] = True
        else:
            for a, r in move.rewards.items():
                if a in live:
                    self.rewards[a] = float(r)
            for a in move.terminate:
                if a in live:
                    self.terminations[a] = True
            if self.truncate_after is not None and self.moves >= self.truncate_after:
                for a in self._live():
                    self.truncations[a] = True
        self._accumulate_rewards()
        still = self._live()
        if still:
            order = self.agents
            start = order.index(agent)
            rotation = [order[(start + j) % len(order)] for j in range(1, len(order) + 1)]
            candidates = [a for a in rotation if a in still]
            self.agent_selection = candidates[(move.skip if move else 0) % len(candidates)]
        self._deads_step_first()

    def _deads_step_first(self) -> None:
        dead = [a for a in self.agents if self.terminations[a] or self.truncations[a]]
        if dead:
            self._skip_agent_selection = self.agent_selection
            self.agent_selection = dead[0]


class ShiftingCrowd(SharedSpaces):
    """A Parallel env whose agents come and go.

    ``schedule`` maps an agent id to ``(arrive, leave)`` step numbers: the agent is live from
    step ``arrive`` (0 = at reset) until it is terminated by step ``leave``. Each live agent is
    paid ``(step + 1) * scale + its index`` per step, minus 1 for each action equal to 0. The
    episode is truncated at ``max_steps`` for agents still live.
    """

    metadata = {"name": "shifting_crowd", "render_modes": []}

    def __init__(self, schedule: dict[str, tuple[int, int]] | None = None, max_steps: int = 10,
                 scale: float = 0.1):
        self.schedule = schedule or {"a_0": (0, 4), "a_1": (2, 7), "a_2": (0, 100), "a_3": (5, 6)}
        super().__init__(list(self.schedule), spaces.Box(-1e6, 1e6, (2,), np.float32),
                         spaces.Discrete(2))
        self.max_steps = max_steps
        self.scale = scale

    def _obs(self, agent: str) -> np.ndarray:
        return np.array([self.t, self.possible_agents.index(agent)], np.float32)

    def reset(self, seed: int | None = None, options: dict | None = None):
        self.t = 0
        self.agents = [a for a, (arrive, _) in self.schedule.items() if arrive == 0]
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict):
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"no action for live agents {missing}")
        rewards = {
            a: (self.t + 1) * self.scale + self.possible_agents.index(a) - (1.0 if int(actions[a]) == 0 else 0.0)
            for a in self.agents
        }
        self.t += 1
        terms = {a: self.schedule[a][1] <= self.t for a in self.agents}
        truncs = {a: self.t >= self.max_steps and not terms[a] for a in self.agents}
        obs = {a: self._obs(a) for a in self.agents}
        infos: dict[str, dict] = {a: {} for a in self.agents}
        staying = [a for a in self.agents if not (terms[a] or truncs[a])]
        if self.t < self.max_steps:
            for a, (arrive, _) in self.schedule.items():
                if arrive == self.t and a not in staying:
                    staying.append(a)
                    obs[a] = self._obs(a)
                    infos[a], rewards[a], terms[a], truncs[a] = {}, 0.0, False, False
        self.agents = staying
        return obs, rewards, terms, truncs, infos


class HiddenGoal(SharedSpaces):
    """A cooperative Parallel env with a global state that holds what no agent observes.

    ``n_agents`` agents walk on the cells ``0 .. size-1`` of a line (actions: left, stay,
    right). Each episode hides a goal cell; every agent is paid minus the team's mean distance
    to it, each step, and all are terminated after ``length`` steps. An agent observes only its
    own cell. ``state()`` is ``[episode, t, goal, cell of each agent]`` (``episode`` counts the
    resets of this env object), the goal and the other agents' cells being in no
    observation. ``with_state: false`` gives the env no state (no ``state_space``);
    ``flat_state: false`` gives it a state shaped ``[1, 3 + n_agents]``.
    """

    metadata = {"name": "hidden_goal", "render_modes": []}

    def __init__(self, n_agents: int = 2, size: int = 5, length: int = 6,
                 with_state: bool = True, flat_state: bool = True):
        super().__init__([f"agent_{i}" for i in range(n_agents)],
                         spaces.Box(0, size - 1, (1,), np.float32), spaces.Discrete(3))
        self.size, self.length = size, length
        self._shape = (3 + n_agents,) if flat_state else (1, 3 + n_agents)
        if with_state:
            self.state_space = spaces.Box(-np.inf, np.inf, self._shape, np.float32)
        self.rng = np.random.default_rng()
        self.episode, self.t, self.goal = -1, 0, 0
        self.cells = np.zeros(n_agents, np.int64)

    def state(self) -> np.ndarray:
        if not hasattr(self, "state_space"):
            return super().state()
        return np.array([self.episode, self.t, self.goal, *self.cells],
                        np.float32).reshape(self._shape)

    def _obs(self) -> dict[str, np.ndarray]:
        return {a: np.array([self.cells[i]], np.float32) for i, a in enumerate(self.possible_agents)}

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.episode += 1
        self.t = 0
        self.goal = int(self.rng.integers(self.size))
        self.cells = self.rng.integers(self.size, size=len(self.possible_agents))
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions: dict):
        moves = np.array([int(actions[a]) - 1 for a in self.possible_agents])
        self.cells = np.clip(self.cells + moves, 0, self.size - 1)
        self.t += 1
        reward = -float(np.abs(self.cells - self.goal).mean())
        done = self.t >= self.length
        agents = self.agents
        if done:
            self.agents = []
        return (self._obs(), dict.fromkeys(agents, reward), dict.fromkeys(agents, done),
                dict.fromkeys(agents, False), {a: {} for a in agents})


def start_turns(env: AECEnv) -> None:
    """Start a turn-based toy game's episode: every possible agent in, nothing paid or ended
    yet, the first agent to move."""
    env.agents = list(env.possible_agents)
    env.rewards = dict.fromkeys(env.agents, 0.0)
    env._cumulative_rewards = dict.fromkeys(env.agents, 0.0)
    env.terminations = dict.fromkeys(env.agents, False)
    env.truncations = dict.fromkeys(env.agents, False)
    env.infos = {a: {} for a in env.agents}
    env.agent_selection = env.agents[0]


def start_move(env: AECEnv, action: object) -> str | None:
    """Start a turn-based toy game's move: the agent whose turn it is, with its running total
    and the last move's rewards cleared; None when that agent is done (its dead step is taken
    and nothing else happens)."""
    agent = env.agent_selection
    if env.terminations[agent] or env.truncations[agent]:
        env._was_dead_step(action)
        return None
    env._cumulative_rewards[agent] = 0.0
    env._clear_rewards()
    return agent


def cut_at_max_cycles(env: ParallelEnv, obs: dict, rewards: dict, max_cycles: int) -> tuple:
    """What ``step`` returns for a Parallel env whose episodes end only by truncation, after
    ``max_cycles`` steps (``env.t`` counts them); its agents leave when the episode ends."""
    agents = env.agents
    done = env.t >= max_cycles
    terms = dict.fromkeys(agents, False)
    truncs = dict.fromkeys(agents, done)
    infos: dict[str, dict] = {a: {} for a in agents}
    if done:
        env.agents = []
    return obs, rewards, terms, truncs, infos


def scripted_turn_game(**kwargs) -> ScriptedTurnGame:
    return ScriptedTurnGame(**kwargs)


def shifting_crowd(**kwargs) -> ShiftingCrowd:
    return ShiftingCrowd(**kwargs)


def hidden_goal(**kwargs) -> HiddenGoal:
    return HiddenGoal(**kwargs)

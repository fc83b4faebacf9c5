"""OpenSpiel games as PettingZoo envs: ``env.id: openspiel:<game>[(params)]``.

Turn-based games become AEC envs and simultaneous-move games Parallel envs. Chance nodes are
resolved inside the env by its own generator (seeded by ``reset(seed=...)``) with OpenSpiel's
outcome probabilities, so agents only ever see decision nodes. Each player's reward at a step is
what its ``state.returns()`` (OpenSpiel's rewards so far) grew by in that step, so every reward
is paid once and an episode's rewards sum to ``state.returns()``. An episode is terminated only at a terminal state;
the env never truncates (``train.max_steps_per_episode`` does, where a user asks).

Observations are ``{"observation": float32 vector, "action_mask": int8 vector}``: the game's
observation tensor or information-state tensor (``env.kwargs.observation``), flattened, and
the legal actions of the agent asked to act (all zeros for the others).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv

from interplay.envs.adapters import EnvContractError
from interplay.envs.registry import EnvSpecError

OBSERVATIONS = ("auto", "observation", "information_state")
"""What an agent sees: the game's observation tensor, its information-state tensor, or (auto)
the observation tensor where the game has one and the information state otherwise."""


RENDER_MODES = ("ansi", "human", "rgb_array")
"""OpenSpiel games draw themselves as text: returned (ansi), printed (human), or drawn as a
picture of that text (rgb_array, for GIFs)."""

SEED_PARAMS = ("rng_seed", "seed")
"""Parameters by which games that sample chance themselves are seeded; set from each seeded
reset unless ``env.kwargs`` fixes them."""


class OpenSpielError(EnvSpecError):
    """An OpenSpiel game (or setting) interplay cannot drive, named with what is missing."""


def _pyspiel() -> Any:
    try:
        import pyspiel
    except ImportError as err:
        raise OpenSpielError(
            "env.id 'openspiel:...' needs OpenSpiel: pip install 'interplay[openspiel]' "
            f"(the open_spiel package) ({err})") from err
    return pyspiel


def load_game(spec: str, params: dict[str, Any] | None = None) -> Any:
    """The game ``spec`` names (``goofspiel(num_cards=4)``), with ``params`` over its own."""
    pyspiel = _pyspiel()
    if not spec:
        raise OpenSpielError("env.id 'openspiel:' names no game; e.g. openspiel:kuhn_poker")
    try:
        game = pyspiel.load_game(spec)
        if params:
            merged = {**game.get_parameters(), **params}
            game = pyspiel.load_game(game.get_type().short_name, merged)
    except pyspiel.SpielError as err:
        known = ", ".join(g.short_name for g in pyspiel.registered_games()
                          if g.default_loadable)
        given = f" with env.kwargs {params}" if params else ""
        raise OpenSpielError(f"env.id 'openspiel:{spec}'{given}: OpenSpiel cannot load it: "
                             f"{err}. Games: {known}") from err
    return game


def _tensor_kind(game: Any, observation: str, spec: str) -> str:
    """Which tensor agents see; a named error when the game lacks it."""
    if observation not in OBSERVATIONS:
        raise OpenSpielError(f"env.kwargs.observation must be one of {', '.join(OBSERVATIONS)}, "
                             f"got {observation!r}")
    gtype = game.get_type()
    has = {"observation": gtype.provides_observation_tensor,
           "information_state": gtype.provides_information_state_tensor}
    if observation == "auto":
        for kind in ("observation", "information_state"):
            if has[kind]:
                return kind
        raise OpenSpielError(f"openspiel:{spec}: the game provides neither an observation tensor "
                             "nor an information-state tensor, which agents need as input")
    if not has[observation]:
        other = "information_state" if observation == "observation" else "observation"
        alt = (f"; it has the {other} tensor: -s env.kwargs.observation={other}"
               if has[other] else "; it has no tensor observation of any kind")
        raise OpenSpielError(f"openspiel:{spec}: env.kwargs.observation={observation}: the game "
                             f"provides no {observation.replace('_', '-')} tensor{alt}")
    return observation


def _tensor_size(game: Any, kind: str, spec: str) -> int:
    """Numbers in one observation of ``kind``; a named error where the game cannot say."""
    try:
        shape = (game.observation_tensor_shape() if kind == "observation"
                 else game.information_state_tensor_shape())
    except _pyspiel().SpielError as err:
        raise OpenSpielError(f"openspiel:{spec}: the game declares its {kind.replace('_', '-')} "
                             f"tensor but cannot give its shape ({err})") from err
    return int(np.prod(shape))


def _check_supported(game: Any, spec: str) -> None:
    pyspiel = _pyspiel()
    gtype = game.get_type()
    dynamics = gtype.dynamics
    if dynamics not in (pyspiel.GameType.Dynamics.SEQUENTIAL, pyspiel.GameType.Dynamics.SIMULTANEOUS):
        raise OpenSpielError(f"openspiel:{spec}: {dynamics.name.lower()} dynamics are not "
                             "supported (only sequential, turn-based, and simultaneous-move games)")
    if game.num_players() < 1:
        raise OpenSpielError(f"openspiel:{spec}: a game of {game.num_players()} players has no agents")


def openspiel_factory(spec: str, kwargs: dict[str, Any]) -> Callable[[], Any]:
    """A factory of env copies for ``openspiel:<spec>``; the game is checked now, so that a
    game interplay cannot drive is named before any work starts.

    ``kwargs``: ``observation`` (see :data:`OBSERVATIONS`), ``render_mode`` (``ansi`` or
    ``human``), and any other key is a game parameter (``num_cards: 4``)."""
    params = dict(kwargs)
    observation = params.pop("observation", "auto")
    render_mode = params.pop("render_mode", None)
    if render_mode not in (None, *RENDER_MODES):
        raise OpenSpielError(f"env.kwargs.render_mode must be one of {', '.join(RENDER_MODES)}, "
                             f"got {render_mode!r}")
    game = load_game(spec, params)
    _check_supported(game, spec)
    kind = _tensor_kind(game, observation, spec)
    _tensor_size(game, kind, spec)
    simultaneous = game.get_type().dynamics == _pyspiel().GameType.Dynamics.SIMULTANEOUS
    cls = OpenSpielParallelEnv if simultaneous else OpenSpielAECEnv
    return functools.partial(cls, spec, params, kind, render_mode)


def text_picture(text: str) -> np.ndarray:
    """``text`` drawn black on white in the default bitmap font, three times its size, as an
    RGB array."""
    from PIL import Image, ImageDraw

    lines = text.splitlines() or [""]
    width = 8 + 6 * max(len(line) for line in lines)
    height = 8 + 11 * len(lines)
    picture = Image.new("RGB", (width + width % 2, height + height % 2), "white")
    ImageDraw.Draw(picture).multiline_text((4, 4), "\n".join(lines), fill="black", spacing=0)
    return np.asarray(picture.resize((3 * picture.width, 3 * picture.height), Image.Resampling.NEAREST))


class _Game:
    """What both env kinds share: the game, its spaces, chance, rewards, observations."""

    metadata: dict[str, Any] = {"render_modes": list(RENDER_MODES)}

    def _setup(self, spec: str, params: dict[str, Any], kind: str, render_mode: str | None) -> None:
        self.game = load_game(spec, params)
        self.spec = spec
        self.metadata = {**type(self).metadata, "name": f"openspiel:{spec}"}
        self.render_mode = render_mode
        self._kind = kind
        given = self.game.get_parameters()
        self._seed_param = next((k for k in SEED_PARAMS if k in given and k not in params
                                 and f"{k}=" not in spec), None)
        n = self.game.num_players()
        self.possible_agents = [f"player_{i}" for i in range(n)]
        self.agents: list[str] = []
        self._obs_dim = _tensor_size(self.game, kind, spec)
        self._num_actions = self.game.num_distinct_actions()
        obs_space = spaces.Dict({
            "observation": spaces.Box(-np.inf, np.inf, (self._obs_dim,), np.float32),
            "action_mask": spaces.Box(0, 1, (self._num_actions,), np.int8),
        })
        self.observation_spaces = dict.fromkeys(self.possible_agents, obs_space)
        self.action_spaces = {a: spaces.Discrete(self._num_actions) for a in self.possible_agents}
        self._rng = np.random.default_rng()
        self.history: list[int] = []  # every action taken, chance outcomes included
        self._paid = np.zeros(n)
        # OpenSpiel's state of the game (not PettingZoo's state(), a global observation,
        # which OpenSpiel games do not have)
        self.game_state = self.game.new_initial_state()

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def _new_state(self, seed: int | None) -> None:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            if self._seed_param is not None:  # a game that samples its chance events itself
                self.game = load_game(self.game.get_type().short_name,
                                      {**self.game.get_parameters(), self._seed_param: seed})
        self.game_state = self.game.new_initial_state()
        self.history = []
        # Rewards paid out so far; returns() before any move (rare) goes out with the first.
        self._paid = np.zeros(len(self.possible_agents))

    def restored(self) -> None:
        """After a snapshot put ``history`` back: replay it, so the game is where it was."""
        state = self.game.new_initial_state()
        for i, action in enumerate(self.history):
            if state.is_simultaneous_node():
                raise EnvContractError(f"openspiel:{self.spec}: a snapshot's action history "
                                       f"meets a simultaneous node at move {i}")
            state.apply_action(action)
        self.game_state = state

    def _apply(self, action: int) -> None:
        self.game_state.apply_action(action)
        self.history.append(action)

    def _pay(self) -> np.ndarray:
        """Each player's reward since the last payment: what ``returns()`` (the rewards so far,
        the final scores at a terminal state) grew by. Reading ``returns()`` rather than
        ``rewards()`` counts every reward once: some games repeat a move's ``rewards()``
        through the chance nodes that follow it (2048, laser_tag)."""
        now = np.asarray(self.game_state.returns(), np.float64)
        due = now - self._paid
        self._paid = self._paid + due
        return due

    def _resolve_chance(self) -> None:
        """Sample chance outcomes until a player decides (or the game ends)."""
        state = self.game_state
        while state.is_chance_node():
            self._apply(self._draw(state.chance_outcomes()))

    def _draw(self, outcomes: list[tuple[int, float]]) -> int:
        """One outcome, with its probability (a plain walk: chance lists are short, and
        ``Generator.choice`` with weights costs more than the game's step)."""
        u = self._rng.random() * sum(p for _, p in outcomes)
        for outcome, p in outcomes:
            u -= p
            if u < 0:
                return int(outcome)
        return int(next(o for o, p in reversed(outcomes) if p > 0))  # rounding left u >= 0

    def _legal(self, player: int) -> list[int]:
        return self.game_state.legal_actions(player)

    def _observe(self, player: int, legal: list[int] | None) -> dict[str, np.ndarray]:
        state = self.game_state
        tensor = (state.observation_tensor(player) if self._kind == "observation"
                  else state.information_state_tensor(player))
        mask = np.zeros(self._num_actions, np.int8)
        if legal:
            mask[legal] = 1
        return {"observation": np.asarray(tensor, np.float32), "action_mask": mask}

    def _illegal(self, agent: str, action: Any, legal: list[int]) -> EnvContractError:
        return EnvContractError(
            f"openspiel:{self.spec}: step {len(self.history)}: action {action!r} of {agent!r} is "
            f"not legal here (legal: {legal}); read the action_mask of its observation")

    def render(self) -> str | np.ndarray | None:
        text = str(self.game_state)
        if self.render_mode == "human":
            print(text)
            return None
        return text_picture(text) if self.render_mode == "rgb_array" else text

    def close(self) -> None:
        pass


class OpenSpielAECEnv(_Game, AECEnv):
    """A turn-based OpenSpiel game; one player moves per step, as OpenSpiel says."""

    def __init__(self, spec: str, params: dict[str, Any], kind: str, render_mode: str | None = None):
        super().__init__()
        self._setup(spec, params, kind, render_mode)

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self._new_state(seed)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict] = {a: {} for a in self.agents}
        self._resolve_chance()
        self._settle(np.zeros(len(self.possible_agents)))

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        player = int(agent.rpartition("_")[2])
        state = self.game_state
        legal = (self._legal(player) if not state.is_terminal()
                 and state.current_player() == player else None)
        return self._observe(player, legal)

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        player = int(agent.rpartition("_")[2])
        legal = self._legal(player)
        if action is None or int(action) not in legal:
            raise self._illegal(agent, action, legal)
        self._cumulative_rewards[agent] = 0.0
        self._apply(int(action))
        self._resolve_chance()
        self._settle(self._pay())
        self._accumulate_rewards()

    def _settle(self, paid: np.ndarray) -> None:
        """Book this step's rewards and who moves next (or that the game is over)."""
        self.rewards = {a: float(r) for a, r in zip(self.possible_agents, paid, strict=True)}
        state = self.game_state
        if state.is_terminal():
            self.terminations = dict.fromkeys(self.agents, True)
            if self.agents and getattr(self, "agent_selection", None) not in self.agents:
                self.agent_selection = self.agents[0]
            return
        if state.is_simultaneous_node():  # not reached for sequential games; named if it is
            raise EnvContractError(f"openspiel:{self.spec}: a simultaneous node in a game "
                                   "declared sequential")
        self.agent_selection = self.possible_agents[state.current_player()]


class OpenSpielParallelEnv(_Game, ParallelEnv):
    """A simultaneous-move OpenSpiel game: every player picks an action at every step.

    At a node where one player alone decides, the others are offered one action (0), which
    is not applied.
    """

    def __init__(self, spec: str, params: dict[str, Any], kind: str, render_mode: str | None = None):
        self._setup(spec, params, kind, render_mode)
        self._joint: list[list[int]] = []  # joint actions at simultaneous nodes, in order

    def reset(self, seed: int | None = None, options: dict | None = None
              ) -> tuple[dict[str, Any], dict[str, dict]]:
        self._new_state(seed)
        self._joint = []
        self.agents = list(self.possible_agents)
        self._resolve_chance()
        return self._observations(), {a: {} for a in self.agents}

    def restored(self) -> None:
        """Replay the sequential moves and joint actions a snapshot put back."""
        state = self.game.new_initial_state()
        joint = iter(self._joint)
        for action in self.history:
            while state.is_simultaneous_node():
                state.apply_actions(next(joint))
            state.apply_action(action)
        for rest in joint:
            state.apply_actions(rest)
        self.game_state = state

    def _legal_now(self) -> dict[int, list[int]]:
        state = self.game_state
        n = len(self.possible_agents)
        if state.is_terminal():
            return {}
        if state.is_simultaneous_node():
            return {p: self._legal(p) for p in range(n)}
        mover = state.current_player()
        return {p: self._legal(p) if p == mover else [0] for p in range(n)}

    def _observations(self) -> dict[str, dict[str, np.ndarray]]:
        legal = self._legal_now()
        return {a: self._observe(p, legal.get(p)) for p, a in enumerate(self.possible_agents)
                if a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        state = self.game_state
        legal = self._legal_now()
        chosen = []
        for p, agent in enumerate(self.possible_agents):
            action = actions.get(agent)
            if action is None or int(action) not in legal.get(p, ()):
                raise self._illegal(agent, action, legal.get(p, []))
            chosen.append(int(action))
        if state.is_simultaneous_node():
            state.apply_actions(chosen)
            self._joint.append(chosen)
        else:
            self._apply(chosen[state.current_player()])
        self._resolve_chance()
        paid = self._pay()
        over = state.is_terminal()
        agents = self.agents
        obs = self._observations()
        rewards = {a: float(r) for a, r in zip(self.possible_agents, paid, strict=True)}
        terms = dict.fromkeys(agents, over)
        truncs = dict.fromkeys(agents, False)
        infos: dict[str, dict] = {a: {} for a in agents}
        if over:
            self.agents = []
        return obs, rewards, terms, truncs, infos

"""Gymnasium multi-agent envs as PettingZoo Parallel envs: ``env.id: gymma:<gymnasium id>``.

The convention EPyMARL drives and the robotic warehouse (``rware``), level-based foraging and
others follow: one Gymnasium env whose observation and action spaces are Tuples (one entry
per agent), whose ``step`` takes a list of actions and returns a tuple of observations, a
list of rewards (or one shared number), and one done flag (or a list of them, the episode
ending when all are set). Agents are named ``agent_0``, ``agent_1``, ... in Tuple order.

An episode that ends at the env's time limit is truncated, not terminated: when Gymnasium's
``TimeLimit`` says so, when the old ``TimeLimit.truncated`` info key says so, or when it ends
at the step count the env keeps as its own limit (rware's ``max_steps``). The env's global
state is offered where it has one (``state()`` or ``get_state()``, with a Box ``state_space``
or a ``get_state_size()``).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from interplay.envs.adapters import EnvContractError
from interplay.envs.registry import EnvSpecError, registering_package

LIMIT_ATTRS = ("max_steps", "_max_steps", "max_episode_steps", "_max_episode_steps")
"""Attributes in which multi-agent Gymnasium envs keep their own episode step limit."""


class GymmaError(EnvSpecError):
    """A Gymnasium env that does not follow the multi-agent convention ``gymma:`` drives."""


def gymma_factory(env_id: str, kwargs: dict[str, Any]) -> Callable[[], Any]:
    """A factory of copies of ``gymma:<env_id>``; the first copy is built now, so that an
    unknown id or an env of the wrong kind is named before any work starts.

    ``kwargs`` go to ``gymnasium.make`` (``max_episode_steps`` adds a time limit); its
    environment checker is off unless ``disable_env_checker`` is given (it warns at every
    step about the list of rewards the convention returns)."""
    make = functools.partial(GymMultiAgentEnv, env_id, dict(kwargs))
    make().close()
    return make


def _make(env_id: str, kwargs: dict[str, Any]) -> Any:
    from gymnasium.error import Error as GymnasiumError

    if not env_id:
        raise GymmaError("env.id 'gymma:' names no env; e.g. gymma:rware:rware-tiny-2ag-v2")
    try:
        return _make_importing(env_id, {"disable_env_checker": True, **kwargs})
    except (GymnasiumError, ModuleNotFoundError) as err:
        hint = ("" if ":" in env_id else
                f"; if a package registers it on import, name it first: gymma:<package>:{env_id} "
                "(gymma:rware:rware-tiny-2ag-v2)")
        raise GymmaError(f"env.id 'gymma:{env_id}': gymnasium.make cannot build it: "
                         f"{type(err).__name__}: {err}{hint}") from err
    except TypeError as err:
        given = ", ".join(f"env.kwargs.{k}" for k in kwargs) or "no env.kwargs"
        raise GymmaError(f"env.id 'gymma:{env_id}' with {given}: {err}") from err


def _make_importing(env_id: str, kwargs: dict[str, Any]) -> Any:
    """``gymnasium.make``; an id not registered yet whose first word is an installed package
    (``rware-tiny-2ag-v2``) is made again after importing that package, which registers it."""
    import gymnasium
    from gymnasium.error import NameNotFound

    try:
        return gymnasium.make(env_id, **kwargs)
    except NameNotFound:
        package = registering_package(env_id)
        if package is None:
            raise
    importlib.import_module(package)
    return gymnasium.make(env_id, **kwargs)


def _per_agent(space: spaces.Space, what: str, env_id: str) -> list[spaces.Space]:
    if not isinstance(space, spaces.Tuple) or not space.spaces:
        raise GymmaError(
            f"env.id 'gymma:{env_id}': its {what} space is {space}, not a Tuple with one space "
            "per agent; gymma: drives multi-agent envs of that convention (for PettingZoo envs "
            "give their module path)")
    return list(space.spaces)


class GymMultiAgentEnv(ParallelEnv):
    """One Gymnasium multi-agent env copy, seen as a Parallel env."""

    def __init__(self, env_id: str, kwargs: dict[str, Any]):
        self.env = _make(env_id, kwargs)
        self.env_id = env_id
        obs = _per_agent(self.env.observation_space, "observation", env_id)
        act = _per_agent(self.env.action_space, "action", env_id)
        if len(obs) != len(act):
            raise GymmaError(f"env.id 'gymma:{env_id}': {len(obs)} observation spaces but "
                             f"{len(act)} action spaces; the convention has one of each per agent")
        self.possible_agents = [f"agent_{i}" for i in range(len(obs))]
        self.agents: list[str] = []
        self.observation_spaces = dict(zip(self.possible_agents, obs, strict=True))
        self.action_spaces = dict(zip(self.possible_agents, act, strict=True))
        self.metadata = {**getattr(self.env, "metadata", {}), "name": f"gymma:{env_id}"}
        self.render_mode = getattr(self.env, "render_mode", None)
        self._state_fn, space = self._global_state()
        if space is not None:
            self.state_space = space
        self._t = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def _global_state(self) -> tuple[Callable[[], Any] | None, spaces.Box | None]:
        inner = self.env.unwrapped
        fn = getattr(inner, "state", None) or getattr(inner, "get_state", None)
        if not callable(fn):
            return None, None
        space = getattr(inner, "state_space", None)
        if not isinstance(space, spaces.Box):
            size = getattr(inner, "get_state_size", None)
            if not callable(size):
                return None, None
            space = spaces.Box(-np.inf, np.inf, (int(size()),), np.float32)
        return fn, space

    def state(self) -> np.ndarray:
        if self._state_fn is None:
            raise NotImplementedError(f"gymma:{self.env_id} offers no global state")
        return np.asarray(self._state_fn(), np.float32)

    def _at_own_limit(self) -> bool:
        """Whether this step is the last the env allows by its own step limit."""
        inner = self.env.unwrapped
        for name in LIMIT_ATTRS:
            value = getattr(inner, name, None)
            if isinstance(value, int | np.integer) and not isinstance(value, bool) and value > 0:
                return self._t >= int(value)
        return False

    def _split(self, obs: Any) -> dict[str, Any]:
        if not isinstance(obs, Sequence | np.ndarray) or len(obs) != len(self.possible_agents):
            raise EnvContractError(
                f"gymma:{self.env_id}: step {self._t}: expected one observation per agent "
                f"({len(self.possible_agents)}), got {type(obs).__name__}")
        return dict(zip(self.possible_agents, obs, strict=True))

    def reset(self, seed: int | None = None, options: dict | None = None
              ) -> tuple[dict[str, Any], dict[str, dict]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self._t = 0
        self.agents = list(self.possible_agents)
        return self._split(obs), dict.fromkeys(self.agents, info)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        try:
            joint = [actions[a] for a in self.possible_agents]
        except KeyError as err:
            raise EnvContractError(f"gymma:{self.env_id}: step {self._t}: no action for "
                                   f"{err.args[0]!r}; every agent acts at every step") from None
        obs, reward, done, truncated, info = self.env.step(joint)
        self._t += 1
        agents = self.possible_agents
        rewards = self._rewards(reward)
        old_style = bool(info.get("TimeLimit.truncated", False)) if isinstance(info, dict) else False
        over = bool(np.all(done))
        at_limit = over and (old_style or self._at_own_limit())
        terminated = over and not at_limit
        cut = not terminated and (at_limit or bool(np.all(truncated)))
        infos = dict.fromkeys(agents, info)
        out = (self._split(obs), rewards, dict.fromkeys(agents, terminated),
               dict.fromkeys(agents, cut), infos)
        if terminated or cut:
            self.agents = []
        return out

    def _rewards(self, reward: Any) -> dict[str, float]:
        agents = self.possible_agents
        if np.ndim(reward) == 0:  # one team reward: every agent gets it
            return dict.fromkeys(agents, float(reward))
        values = np.asarray(reward, np.float64).reshape(-1)
        if values.size != len(agents):
            raise EnvContractError(f"gymma:{self.env_id}: step {self._t}: {values.size} rewards "
                                   f"for {len(agents)} agents")
        return dict(zip(agents, values.tolist(), strict=True))

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()

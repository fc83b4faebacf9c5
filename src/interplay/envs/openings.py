"""Training episodes of a turn-based game that start from varied positions (``env.opening``).

Self-play between deterministic or nearly deterministic players keeps meeting the same few
lines of a game, so a policy can grow strong in them and weak everywhere else: a game opened
with one unusual move, by a player from outside its pool, finds it out. :class:`OpeningEnv`
wraps each training copy of a turn-based (AEC) PettingZoo env and, at every reset, plays the
first ``moves`` moves itself (or a number drawn uniformly from a range), each uniformly
among the legal ones (the ``action_mask`` in the
observation or the info; every action of a Discrete space where there is none). The learner
and its opponents then play on from there. Nobody books those moves, and rewards paid during
them count for nobody. An opening that ends the game is drawn again.

The draws come from the copy's own generator, seeded by the copy's seeded reset, as
:class:`~interplay.envs.variation.VariedEnv`'s are: a seeded run opens its games alike, and
the generator is part of the copy's snapshot, so a resumed run goes on as it would have.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces

from interplay.envs.adapters import EnvContractError
from interplay.errors import ConfigError

_SALT = 0x09E7  # the openings' stream, apart from the env's own and from VariedEnv's
TRIES = 100  # openings drawn in a row that all end the game before it is called impossible


class OpeningEnv:
    """A turn-based PettingZoo env whose episodes each begin with ``moves`` random legal moves
    (``(low, high)``: a number drawn uniformly from low to high, per episode)."""

    def __init__(self, env: Any, moves: int | tuple[int, int], name: str):
        # Names of their own: any other attribute is the env's (a game may have ``moves``).
        self.env = env
        self.opening_range = (moves, moves) if isinstance(moves, int) else tuple(moves)
        self.env_name = name
        self.opening_rng = np.random.default_rng(_SALT)  # replaced at the first seeded reset

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet (a copy being unpickled): no recursion
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self.opening_rng = np.random.default_rng(
                np.random.SeedSequence(seed, spawn_key=(_SALT,)))
        low, high = self.opening_range
        for _ in range(TRIES):
            self.env.reset(seed=seed, options=options)
            seed = None  # a redraw goes on from the env's own stream
            moves = high if low == high else int(self.opening_rng.integers(low, high + 1))
            if self._open(moves):
                return
        length = f"{low}" if low == high else f"{low} to {high}"
        raise EnvContractError(
            f"env.opening: each of {TRIES} openings of {length} random legal moves ended "
            f"an episode of {self.env_name}; lower env.opening")

    def _open(self, moves: int) -> bool:
        """Play an opening of ``moves`` moves; False where the game ended during it."""
        env = self.env
        for _ in range(moves):
            if not env.agents:
                return False
            agent = env.agent_selection
            obs, _reward, term, trunc, info = env.last()
            if term or trunc:
                return False
            env.step(self._draw(agent, obs, info))
        return bool(env.agents) and not any(
            env.terminations.get(a, False) or env.truncations.get(a, False) for a in env.agents)

    def _draw(self, agent: str, obs: Any, info: dict | None) -> int:
        space = self.env.action_space(agent)
        if not isinstance(space, spaces.Discrete):
            raise ConfigError(f"env.opening draws moves from Discrete action spaces; agent "
                              f"{agent!r} of {self.env_name} acts in {space}")
        mask = obs.get("action_mask") if isinstance(obs, dict) else None
        if mask is None and isinstance(info, dict):
            mask = info.get("action_mask")
        n = int(space.n)
        if mask is None:
            return int(space.start) + int(self.opening_rng.integers(n))
        legal = np.flatnonzero(np.asarray(mask).reshape(-1)[:n])
        if len(legal) == 0:
            raise EnvContractError(f"env.opening: agent {agent!r} of {self.env_name} has no legal "
                                   "move to open with (its action_mask is all False)")
        return int(space.start) + int(legal[self.opening_rng.integers(len(legal))])


def opening_maker(make: Callable[[], Any], moves: int | tuple[int, int],
                  name: str) -> Callable[[], Any]:
    """A factory of copies of ``make``'s env whose episodes open with ``moves`` random legal
    moves (or a number drawn from a range); a ConfigError for an env that is not turn-based."""

    def build() -> OpeningEnv:
        env = make()
        if not hasattr(env, "agent_iter"):
            env.close()
            raise ConfigError(f"env.opening: {name} is a simultaneous-move (Parallel) env; "
                              "random openings are for turn-based (AEC) games (env.api: aec, "
                              "where the env has both)")
        return OpeningEnv(env, moves, name)

    return build

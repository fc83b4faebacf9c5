"""Random openings for head-to-head games: ``interplay eval --vs --opening K``.

Two deterministic players (a greedy policy and a scripted one, say) play the same game every
time they meet on the same seats, so a thousand games are one game repeated, and a win rate
is 0, 50 or 100% with an interval that means nothing. Drawing the first ``K`` moves of each
game uniformly from the legal moves makes the games differ; from then on both sides play as
they would.

Game ``g`` draws its opening moves from its own stream, seeded by the eval's seed and ``g``
alone. While the opening lasts every move is random, so the position after it depends on
that stream only: the same games are opened alike whatever the opponent and whichever seat
the trained side takes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from interplay.run.actors import ActBatch, Actor, RandomActor, declared
from interplay.run.callbacks import Callbacks
from interplay.run.mapping import PolicySpec
from interplay.seeding import rng_for


class Openings(Callbacks):
    """Counts each copy's env steps since its game began and gives each game its stream.

    Copy ``e``'s ``j``-th game is game ``first_game[e] + j``, so that the copies together
    number their games 0, 1, 2, ... as a fixed quota per copy lays them out.
    """

    def __init__(self, moves: int, seed: int, first_game: list[int]):
        self.moves = moves
        self.seed = seed
        self.first_game = first_game
        self.started = [0] * len(first_game)
        self.played = np.zeros(len(first_game), np.int64)
        self.rngs: list[np.random.Generator | None] = [None] * len(first_game)

    def on_episode_start(self, *, episode: Any, env_index: int, runner: Any) -> None:
        game = self.first_game[env_index] + self.started[env_index]
        self.started[env_index] += 1
        self.played[env_index] = 0
        self.rngs[env_index] = rng_for(self.seed, "opening", str(game))

    def on_episode_step(self, *, episode: Any, env_index: int, runner: Any) -> None:
        self.played[env_index] += 1

    def opening(self, env: np.ndarray) -> np.ndarray:
        """Which of these copies (one per row) are still in their opening."""
        return self.played[env] < self.moves


class OpeningActor:
    """Plays uniformly random legal moves in the opening of each game, then ``inner``'s."""

    def __init__(self, inner: Actor, spec: PolicySpec, openings: Openings):
        self.inner = inner
        self.openings = openings
        self.squashed = declared(inner, "squashed")
        self.wants_env_obs = declared(inner, "wants_env_obs")
        self.random = RandomActor(spec, np.random.default_rng(0))

    def act(self, batch: ActBatch, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        n = batch.obs.shape[0]
        env = batch.env if batch.env is not None else np.zeros(n, np.int64)
        early = self.openings.opening(env)
        if not early.any():
            return self.inner.act(batch, explore)
        action: np.ndarray | None = None
        if not early.all():
            late, _ = self.inner.act(rows_of(batch, ~early), explore)
            action = np.zeros((n, *late.shape[1:]), late.dtype)
            action[~early] = late
        for row in np.flatnonzero(early):
            rng = self.openings.rngs[int(env[row])]
            assert rng is not None  # every copy's game started before its first move
            self.random.rng = rng
            one, _ = self.random.act(rows_of(batch, np.arange(n) == row), explore)
            if action is None:
                action = np.zeros((n, *one.shape[1:]), one.dtype)
            action[row] = one[0]
        assert action is not None
        return action, {}


def rows_of(batch: ActBatch, keep: np.ndarray) -> ActBatch:
    """The rows ``keep`` of ``batch`` (a boolean mask), for an actor that acts for some of them."""
    def pick(x: Any) -> Any:
        return None if x is None else x[keep]

    rows = np.flatnonzero(keep)
    return ActBatch(obs=batch.obs[keep], mask=pick(batch.mask), slot=pick(batch.slot),
                    env=pick(batch.env), first=pick(batch.first),
                    recurrent_state=batch.recurrent_state,
                    agent_ids=[batch.agent_ids[i] for i in rows] if batch.agent_ids else (),
                    env_obs=[batch.env_obs[i] for i in rows] if batch.env_obs else ())

"""The runner on real PettingZoo envs: legal moves in connect four, returns on simple_spread."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import parallel_returns, read_metrics, tiny_cfg
from pettingzoo.utils.wrappers import BaseWrapper

from interplay.envs.adapters import adapt, fields_holder
from interplay.experiment.loop import train


def test_connect_four_random_never_plays_an_illegal_move(tmp_path):
    cfg = tiny_cfg("env.id=pettingzoo.classic.connect_four_v3", "algo.name=random",
                   "train.steps=5000")
    train(cfg, tmp_path)
    rows = read_metrics(tmp_path)
    assert rows[-1]["env_steps"] == 5000
    for row in rows:
        # An illegal move costs the mover -1 with no +1 to the other player.
        assert row["episode_return_min"] == 0 and row["episode_return_max"] == 0
        assert "agent_return_mean/player_0" in row and "agent_return_mean/player_1" in row


def test_simple_spread_random_matches_a_plain_pettingzoo_loop(tmp_path):
    from mpe2 import simple_spread_v3

    rng = np.random.default_rng(3)
    plain = parallel_returns(simple_spread_v3.parallel_env(), 7,
                             lambda o, a: int(rng.integers(5)), episodes=200)
    plain_mean = float(np.mean([ep["agent_0"] for ep in plain]))
    cfg = tiny_cfg("env.id=mpe2.simple_spread_v3", "train.steps=5000", "log.every=5000",
                   "train.seed=7")
    train(cfg, tmp_path)
    row = read_metrics(tmp_path)[-1]
    assert row["episode_len_mean"] == 25
    assert row["episodes_in_report"] == 200
    assert row["agent_return_mean/agent_0"] == pytest.approx(plain_mean, abs=2.0)
    assert -30 < plain_mean < -22


class TenfoldRewards(BaseWrapper):
    """A user's wrapper that keeps a rewards dict of its own."""

    def reset(self, seed=None, options=None):
        super().reset(seed=seed, options=options)
        self.rewards = dict.fromkeys(self.env.agents, 0.0)

    def step(self, action):
        super().step(action)
        self.rewards = {a: 10 * r for a, r in self.env.rewards.items()}


def first_legal_game(env) -> dict[str, float]:
    """Returns of a tic-tac-toe game in which each player takes the first free square."""
    adapter = adapt(env, None)
    step, total = adapter.reset(seed=0), {}
    while not step.over:
        (agent, obs), = step.obs.items()
        step = adapter.step({agent: int(np.flatnonzero(obs["action_mask"])[0])})
        for a, r in step.rewards.items():
            total[a] = total.get(a, 0.0) + r
    return total


def test_an_aec_env_is_read_past_pettingzoo_wrappers_but_not_past_a_users():
    from pettingzoo.classic import tictactoe_v3

    env = tictactoe_v3.env()
    env.reset(seed=0)
    assert fields_holder(env) is env.unwrapped  # PettingZoo's own wrappers only forward
    assert first_legal_game(tictactoe_v3.env()) == {"player_1": 1.0, "player_2": -1.0}
    assert first_legal_game(TenfoldRewards(tictactoe_v3.env())) == {"player_1": 10.0,
                                                                    "player_2": -10.0}

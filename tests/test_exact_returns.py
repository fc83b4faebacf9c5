"""Per-agent returns in metrics.jsonl equal what the env gave, for awkward envs."""

from __future__ import annotations

import pytest
from helpers import aec_returns, parallel_returns, read_metrics, tiny_cfg

from interplay import register_env
from interplay.envs.toy import Move, ScriptedTurnGame, ShiftingCrowd
from interplay.experiment.loop import train

# Rewards land on agents other than the mover, player_1 is terminated on move 2 (and is
# paid on that move), and the env truncates after move 7.
PLAN = [
    Move({"player_1": 1.0, "player_2": 0.25}),
    Move({"player_0": -0.5, "player_1": 2.0, "player_2": 2.0}, terminate=["player_1"]),
    Move({"player_0": 1.5}),
    Move({"player_0": 3.0, "player_2": -1.0}, skip=1),
    Move({"player_2": 0.5}),
    Move({"player_0": 0.125, "player_1": 9.0}),
    Move({"player_0": -2.0, "player_2": 4.0}),
    Move({"player_0": 100.0}),
]


def always_one(obs, agent):
    return 1


def test_turn_based_returns_match_the_standard_loop(tmp_path):
    register_env("plan_game", lambda: ScriptedTurnGame(3, PLAN, truncate_after=7))
    expected = aec_returns(ScriptedTurnGame(3, PLAN, truncate_after=7), 0, lambda o, a: 1)[0]
    assert expected["player_1"] == pytest.approx(3.0)  # paid on its last move, then gone
    cfg = tiny_cfg("env.id=plan_game", "train.steps=700", "log.every=70")
    train(cfg, tmp_path)
    rows = read_metrics(tmp_path)
    assert rows and all(r["episodes_in_report"] == 10 for r in rows)
    for row in rows:
        for agent, ret in expected.items():
            assert row[f"agent_return_mean/{agent}"] == pytest.approx(ret, abs=1e-12)
        assert row["episode_return_mean"] == pytest.approx(sum(expected.values()))
        assert row["episode_len_mean"] == 7


def test_parallel_agents_that_come_and_go(tmp_path):
    register_env("crowd", ShiftingCrowd)
    expected = parallel_returns(ShiftingCrowd(), 0, always_one)[0]
    assert set(expected) == {"a_0", "a_1", "a_2", "a_3"}
    cfg = tiny_cfg("env.id=crowd", "train.steps=100", "log.every=20", "env.num_envs=3",
                   "policies.a.type=scripted", f"policies.a.fn={__name__}:always_one")
    train(cfg, tmp_path)
    rows = [r for r in read_metrics(tmp_path) if r["episodes_in_report"]]
    assert rows
    for row in rows:
        for agent, ret in expected.items():
            assert row[f"agent_return_mean/{agent}"] == pytest.approx(ret, abs=1e-9)
        assert row["episode_len_mean"] == 10


def test_runner_cut_is_truncation_and_counts_env_steps(tmp_path):
    register_env("plan_game_long", lambda: ScriptedTurnGame(3, PLAN * 4))
    cfg = tiny_cfg("env.id=plan_game_long", "train.steps=60", "log.every=60",
                   "train.max_steps_per_episode=5")
    result = train(cfg, tmp_path)
    row = read_metrics(tmp_path)[-1]
    assert row["episode_len_mean"] == 5
    assert result.env_steps == 60 and row["episodes"] == 12

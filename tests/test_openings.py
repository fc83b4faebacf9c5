"""``interplay eval --vs --opening K``: random openings make deterministic games differ."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from interplay.cli import main
from interplay.config.loading import load
from interplay.errors import ConfigError
from interplay.experiment.evaluate import evaluate
from interplay.experiment.loop import train

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
TTT = ["algo.name=dqn", "env.id=pettingzoo.classic.tictactoe_v3", "train.self_play=true",
       "env.num_envs=4", "algo.learning_starts=20", "algo.batch_size=16", "train.steps=40",
       *QUIET]
SEEN: dict[str, list[tuple[int, ...]]] = {"first": [], "last": []}


def _legal(observation: dict) -> np.ndarray:
    return np.flatnonzero(observation["action_mask"])


def _note(who: str, observation: dict) -> None:
    """Keep the boards this player sees with exactly two marks on them."""
    board = np.asarray(observation["observation"])
    if board.sum() == 2:
        SEEN[who].append(tuple(board.astype(int).ravel()))


def first_legal(observation: dict, agent_id: str) -> int:
    _note("first", observation)
    return int(_legal(observation)[0])


def last_legal(observation: dict, agent_id: str) -> int:
    _note("last", observation)
    return int(_legal(observation)[-1])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs") / "ttt"
    train(load([], TTT), folder)
    return folder


def test_without_an_opening_a_deterministic_pair_replays_one_game_per_seat(run, tmp_path):
    report = evaluate(run, vs=f"{__name__}:first_legal", episodes=20, out=tmp_path / "a.json")
    for seat in ("player_1", "player_2"):
        assert max(report[f"{o}_rate/{seat}"] for o in ("win", "draw", "loss")) == 1.0
    assert report["opening"] == 0


def test_an_opening_varies_the_games_alike_for_every_opponent(run, tmp_path):
    for who in SEEN.values():
        who.clear()
    # One copy: games past a copy's quota are played but not counted, and would be noted here.
    one = ["env.num_envs=1"]
    first = evaluate(run, vs=f"{__name__}:first_legal", episodes=40, opening=2, overrides=one,
                     out=tmp_path / "a.json")
    last = evaluate(run, vs=f"{__name__}:last_legal", episodes=40, opening=2, overrides=one,
                    out=tmp_path / "b.json")
    assert first["opening"] == last["opening"] == 2
    assert first["episodes/player_1"] == first["episodes/player_2"] == 20
    # On the first seat the opponent's first own move comes right after the two random ones:
    # the positions it then sees are the openings, and they are the same for both opponents.
    assert Counter(SEEN["first"]) == Counter(SEEN["last"])
    assert len(set(SEEN["first"])) > 3
    for seat in ("player_1", "player_2"):
        assert {"win_ci95/" + seat, "loss_ci95/" + seat} <= set(first)


def test_the_same_seed_gives_the_same_games(run, tmp_path):
    a = evaluate(run, vs="random", episodes=16, opening=3, seed=5, out=tmp_path / "a.json")
    b = evaluate(run, vs="random", episodes=16, opening=3, seed=5, out=tmp_path / "b.json")
    assert a == b | {"checkpoint": a["checkpoint"]}


def test_bad_openings_are_named(run, tmp_path, capsys):
    with pytest.raises(ConfigError, match="--opening"):
        evaluate(run, opening=2, episodes=4, out=tmp_path / "a.json")
    with pytest.raises(ConfigError, match="--opening"):
        evaluate(run, vs="random", opening=-1, episodes=4, out=tmp_path / "a.json")
    assert main(["eval", str(run), "--vs", "random", "--opening", "-2", "--episodes", "4",
                 "--out", str(tmp_path / "c.json")]) == 2
    assert "--opening" in capsys.readouterr().err

"""Random openings: ``interplay eval --vs --opening K`` makes deterministic games differ, and
``env.opening`` starts training episodes of a turn-based game from varied positions."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.classic import tictactoe_v3

from interplay.cli import main
from interplay.config.loading import load
from interplay.envs.adapters import EnvContractError
from interplay.envs.openings import TRIES, OpeningEnv
from interplay.envs.snapshot import capture, restore
from interplay.envs.toy.games import start_move, start_turns
from interplay.errors import ConfigError
from interplay.experiment.build import make_vec_env
from interplay.experiment.evaluate import evaluate
from interplay.experiment.loop import train
from interplay.population.league.best_response import br_config

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


def _marks(env) -> int:
    """Marks on a tic-tac-toe board, as the player to move sees it."""
    return int(np.asarray(env.observe(env.agent_selection)["observation"]).sum())


def _board(env) -> tuple[int, ...]:
    return tuple(np.asarray(env.observe(env.agent_selection)["observation"]).astype(int).ravel())


def test_training_copies_open_with_legal_moves_and_other_copies_start_afresh():
    cfg = load([], [*TTT, "env.opening=4", "env.num_envs=3"])
    vec, _ = make_vec_env(cfg, training=True)
    vec.reset(0)
    assert all(_marks(c.env) == 4 for c in vec.copies)
    for _ in range(30):  # every episode opens with four legal marks, the game still on
        for c in vec.copies:
            c.reset(None)
            assert _marks(c.env) == 4 and c.env.agents == ["player_1", "player_2"]
            assert not any(c.env.terminations.values())
    assert len({_board(c.env) for c in vec.copies}) > 1
    vec.close()
    plain, _ = make_vec_env(cfg)  # evaluation and test phases: the game's own start
    plain.reset(0)
    assert all(_marks(c.env) == 0 for c in plain.copies)
    plain.close()


def test_a_range_of_openings_draws_each_length_in_it_per_episode():
    cfg = load([], [*TTT, "env.opening=[0, 2]", "env.num_envs=2"])
    assert cfg.env.opening == (0, 2)
    vec, _ = make_vec_env(cfg, training=True)
    vec.reset(3)
    seen = []
    for _ in range(60):
        for c in vec.copies:
            c.reset(None)
            seen.append(_marks(c.env))
    vec.close()
    counts = np.bincount(seen, minlength=4)
    assert counts[3] == 0 and (counts[:3] > 8).all(), counts  # 0, 1 and 2 marks, about a third each
    assert load([], ["env.opening=[0, 0]"]).env.opening == 0  # no opening, as 0
    for bad in ("[2, 1]", "[-1, 2]", "[1, 2, 3]"):
        with pytest.raises(ConfigError, match="env.opening"):
            load([], [f"env.opening={bad}"])


def test_openings_follow_the_seed_and_go_on_exactly_from_a_snapshot():
    def boards(env, resets):
        out = []
        for _ in range(resets):
            env.reset()
            out.append(_board(env))
        return out

    a, b = OpeningEnv(tictactoe_v3.env(), 3, "ttt"), OpeningEnv(tictactoe_v3.env(), 3, "ttt")
    a.reset(seed=7)
    b.reset(seed=7)
    assert _board(a) == _board(b) and boards(a, 5) == boards(b, 5)
    snap = capture(a)
    ahead = boards(a, 8)
    fresh = OpeningEnv(tictactoe_v3.env(), 3, "ttt")
    fresh.reset(seed=99)
    restore(fresh, snap)
    assert boards(fresh, 8) == ahead
    other = OpeningEnv(tictactoe_v3.env(), 3, "ttt")
    other.reset(seed=8)
    assert [_board(other), *boards(other, 8)] != [_board(a), *boards(a, 8)]


class Sudden(AECEnv):
    """Two players take turns choosing 0, 1 or 2; a move in ``enders`` ends the game."""

    metadata = {"name": "sudden"}

    def __init__(self, enders=(0,)):
        self.enders = set(enders)
        self.possible_agents = ["p_0", "p_1"]
        self.moves: list[int] = []

    def observation_space(self, agent):
        return spaces.Box(0, 3, (1,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(3)

    def observe(self, agent):
        return np.array([len(self.moves)], np.float32)

    def reset(self, seed=None, options=None):
        start_turns(self)
        self.moves = []

    def step(self, action):
        if start_move(self, action) is None:
            return
        self.moves.append(int(action))
        if int(action) in self.enders:
            self.terminations = dict.fromkeys(self.agents, True)
        self.agent_selection = "p_1" if self.agent_selection == "p_0" else "p_0"


def test_an_opening_that_ends_the_game_is_drawn_again_and_an_impossible_one_is_named():
    env = OpeningEnv(Sudden(), 2, "sudden")
    env.reset(seed=0)
    for _ in range(40):
        env.reset()
        assert len(env.moves) == 2 and 0 not in env.moves and env.agents
    never = OpeningEnv(Sudden(enders=(0, 1, 2)), 1, "sudden")
    with pytest.raises(EnvContractError, match=f"env.opening: each of {TRIES} openings"):
        never.reset(seed=0)


def test_openings_are_refused_where_moves_are_simultaneous_and_left_out_of_best_responses():
    with pytest.raises(ConfigError, match="env.opening.*simultaneous"):
        make_vec_env(load([], ["env.id=interplay.envs.swarm", "env.opening=2"]), training=True)
    with pytest.raises(ConfigError, match="env.opening.*built-in batched"):
        make_vec_env(load([], ["env.id=spread", "env.opening=2"]), training=True)
    with pytest.raises(ConfigError, match="env.opening"):
        load([], ["env.opening=-1"])
    cfg = load([], [*TTT, "env.opening=2"])
    assert br_config(cfg, "shared", "random", 1000, 0)["env"]["opening"] == 0

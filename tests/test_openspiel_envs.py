"""OpenSpiel games through ``openspiel:<game>``: returns equal OpenSpiel's own, chance is
seeded, masks are legal, episodes end only at terminal states, unsupported games are named."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import read_metrics, straight_and_resumed

pyspiel = pytest.importorskip("pyspiel")

from interplay.config.loading import load  # noqa: E402
from interplay.envs.adapters import EnvContractError, adapt  # noqa: E402
from interplay.envs.openspiel import OpenSpielError  # noqa: E402
from interplay.envs.registry import env_factory, register_env  # noqa: E402
from interplay.envs.snapshot import capture, restore  # noqa: E402
from interplay.experiment.loop import train  # noqa: E402

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


def play(env, rng, episodes: int, max_steps: int | None = None):
    """Random legal episodes through interplay's adapter, one at a time (the env holds that
    episode's game when it is yielded): its booked rewards per agent, how it ended, and the
    movers in order."""
    copy = adapt(env, max_steps)
    for _ in range(episodes):
        cs = copy.reset(seed=int(rng.integers(2**31)))
        booked = dict.fromkeys(copy.possible_agents, 0.0)
        movers, ended = [], {}
        while not cs.over:
            movers.append(list(cs.obs))
            cs = copy.step({a: int(rng.choice(np.flatnonzero(o["action_mask"])))
                            for a, o in cs.obs.items()})
            for a, r in cs.rewards.items():
                booked[a] += r
            ended.update(dict.fromkeys(cs.terminated, "terminated"))
            ended.update(dict.fromkeys(cs.truncated, "truncated"))
        yield booked, ended, movers


def replayed_returns(env) -> list[float]:
    """OpenSpiel's returns for the moves the env made, replayed in a fresh state of the game."""
    state = env.game.new_initial_state()
    joint = iter(getattr(env, "_joint", []))
    for action in env.history:
        while state.is_simultaneous_node():
            state.apply_actions(next(joint))
        state.apply_action(action)
    for rest in joint:
        state.apply_actions(rest)
    assert state.is_terminal()
    return list(state.returns())


NAMED_GAMES = ["kuhn_poker", "leduc_poker", "tic_tac_toe", "connect_four", "goofspiel(num_cards=4)",
               "hanabi(players=2)", "liars_dice", "2048", "pig(winscore=20)", "matrix_pd",
               "tiny_bridge_2p", "oshi_zumo"]


def sampled_games(n: int = 6) -> list[str]:
    """A seeded draw among the other registered games that finish quickly."""
    names = [g.short_name for g in pyspiel.registered_games()
             if g.default_loadable and g.dynamics.name in ("SEQUENTIAL", "SIMULTANEOUS")
             and (g.provides_observation_tensor or g.provides_information_state_tensor)]
    slow = {"chess", "go", "shogi", "amazons", "hive", "crazyhouse", "antichess", "dark_chess",
            "kriegspiel", "rbc", "laser_tag", "markov_soccer", "capture_the_flag", "pathfinding",
            "backgammon", "bridge", "gin_rummy", "havannah", "phantom_go", "quoridor", "gomoku",
            "crossword", "chinese_checkers", "dou_dizhu", "go_fish", "crazy_eights", "skat",
            "spades", "hearts", "euchre", "oh_hell", "nine_mens_morris", "checkers", "solitaire",
            "coop_box_pushing", "stones_and_gems", "maedn", "banqi", "lines_of_action", "mancala",
            "oware", "breakthrough", "clobber", "othello", "cursor_go", "dots_and_boxes",
            "einstein_wurfelt_nicht", "pentago", "mnk", "hex", "dark_hex", "dark_hex_ir",
            "latent_ttt", "colored_trails", "repeated_leduc_poker", "cliff_walking", "deep_sea"}
    rest = sorted(set(names) - slow - {n.split("(")[0] for n in NAMED_GAMES})
    return list(np.random.default_rng(7).choice(rest, size=min(n, len(rest)), replace=False))


@pytest.mark.parametrize("game", NAMED_GAMES + sampled_games())
def test_booked_returns_equal_openspiels_own_per_player(game):
    env = env_factory(f"openspiel:{game}")()
    rng = np.random.default_rng(0)
    for booked, ended, _ in play(env, rng, episodes=3):
        returns = env.game_state.returns()
        assert [booked[a] for a in env.possible_agents] == list(returns)
        assert replayed_returns(env) == list(returns)
        assert set(ended.values()) == {"terminated"}  # only at terminal states, never cut


def test_turn_and_simultaneous_games_get_the_matching_pettingzoo_api():
    from pettingzoo import AECEnv, ParallelEnv

    assert isinstance(env_factory("openspiel:kuhn_poker")(), AECEnv)
    assert isinstance(env_factory("openspiel:goofspiel(num_cards=4)")(), ParallelEnv)


def test_chance_follows_the_seed_and_the_outcome_probabilities():
    env = env_factory("openspiel:kuhn_poker")()
    deals = []
    for seed in range(600):
        env.reset(seed=seed)
        deals.append(tuple(env.history[:2]))  # the two cards dealt before anyone moves
    env.reset(seed=5)
    assert tuple(env.history[:2]) == deals[5]
    counts = np.bincount([d[0] for d in deals], minlength=3)
    assert counts.min() > 150  # each of three cards about 200 times
    assert all(a != b for a, b in deals)


def test_a_player_who_moves_twice_in_a_row_is_asked_twice():
    env = env_factory("openspiel:pig(winscore=20)")()
    movers = [m[0] for _, _, ms in play(env, np.random.default_rng(1), episodes=3) for m in ms]
    assert any(a == b for a, b in zip(movers, movers[1:], strict=False))


def test_truncation_comes_only_from_max_steps_per_episode():
    env = env_factory("openspiel:connect_four")()
    [(_, ended, movers)] = list(play(env, np.random.default_rng(2), episodes=1, max_steps=4))
    assert len(movers) == 4 and set(ended.values()) == {"truncated"}


def test_masks_hold_the_legal_actions_of_the_mover_only():
    env = env_factory("openspiel:leduc_poker")()
    env.reset(seed=3)
    mover = env.agent_selection
    for agent in env.possible_agents:
        mask = env.observe(agent)["action_mask"]
        if agent == mover:
            assert np.flatnonzero(mask).tolist() == env.game_state.legal_actions()
        else:
            assert not mask.any()


def test_observation_kinds_are_chosen_and_missing_ones_named():
    info = env_factory("openspiel:kuhn_poker", {"observation": "information_state"})()
    info.reset(seed=0)
    assert info.observe("player_0")["observation"].shape == (11,)
    with pytest.raises(OpenSpielError, match="provides no information-state tensor.*"
                                             "env.kwargs.observation=observation"):
        env_factory("openspiel:tic_tac_toe", {"observation": "information_state"})


@pytest.mark.parametrize(("game", "named"), [
    ("mfg_crowd_modelling", "mean_field dynamics are not supported"),
    ("coin_game", "neither an observation tensor nor an information-state tensor"),
    ("no_such_game", "OpenSpiel cannot load it"),
])
def test_unsupported_games_are_named(game, named):
    with pytest.raises(OpenSpielError, match=named) as err:
        env_factory(f"openspiel:{game}")
    assert game in str(err.value)


def test_game_parameters_come_from_the_name_or_the_kwargs():
    by_name = env_factory("openspiel:goofspiel(num_cards=4)")()
    by_kwargs = env_factory("openspiel:goofspiel", {"num_cards": 4})()
    assert by_name.action_space("player_0").n == by_kwargs.action_space("player_0").n == 4


def test_an_illegal_action_is_named():
    env = env_factory("openspiel:tic_tac_toe")()
    env.reset(seed=0)
    env.step(4)
    with pytest.raises(EnvContractError, match="action 4 of 'player_1' is not legal"):
        env.step(4)


@pytest.mark.parametrize("game", ["leduc_poker", "goofspiel(num_cards=4)"])
def test_a_snapshot_mid_game_resumes_the_same_game(game):
    rng = np.random.default_rng(4)
    env = env_factory(f"openspiel:{game}")()
    copy = adapt(env, None)
    cs = copy.reset(seed=9)
    for _ in range(2):
        cs = copy.step({a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in cs.obs.items()})
    snap = capture(env)
    fresh = env_factory(f"openspiel:{game}")()
    fresh_copy = adapt(fresh, None)
    fresh_copy.reset(seed=1)
    restore(fresh, snap)
    fresh_copy.restored()
    assert str(fresh.game_state) == str(env.game_state)
    while not cs.over:
        moves = {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in cs.obs.items()}
        cs, again = copy.step(moves), fresh_copy.step(moves)
        assert cs.rewards == again.rewards and list(cs.obs) == list(again.obs)
    assert fresh.game_state.returns() == env.game_state.returns()


@pytest.mark.parametrize("game", ["kuhn_poker", "goofspiel(num_cards=4)"])
def test_dqn_self_play_runs_on_turn_based_and_simultaneous_games(tmp_path, game):
    cfg = load([], [f"env.id=openspiel:{game}", "env.num_envs=4", "algo.name=dqn",
                    "algo.learning_starts=32", "algo.batch_size=16", "train.self_play=true",
                    "train.steps=200", "log.every=200", *QUIET])
    train(cfg, tmp_path)
    row = read_metrics(tmp_path)[-1]
    assert row["env_steps"] == 200 and row["episodes"] > 25
    # zero-sum: what one seat wins the other loses
    assert row["episode_return_mean"] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("game", ["leduc_poker", "goofspiel(num_cards=4)"])
def test_a_resumed_run_is_the_run_it_continues(tmp_path, game):
    straight, resumed = straight_and_resumed(
        [f"env.id=openspiel:{game}", "env.num_envs=2", "algo.name=random", "log.every=60",
         "checkpoint.every=60", *QUIET], 120, tmp_path)
    assert straight == resumed


def test_check_warns_about_a_wrapper_that_cuts_every_game_before_it_pays(capsys):
    shimmy = pytest.importorskip("shimmy")
    from interplay.cli import main

    game = pyspiel.load_game("kuhn_poker")
    register_env("shimmy_kuhn", lambda: shimmy.OpenSpielCompatibilityV0(game))
    assert main(["check", "shimmy_kuhn", "--cycles", "20"]) == 0
    assert "every checked episode (20) ended by truncation with zero reward" in capsys.readouterr().out
    assert main(["check", "openspiel:kuhn_poker", "--cycles", "20"]) == 0
    assert "ended by truncation" not in capsys.readouterr().out


def test_games_render_as_text_or_as_a_picture_of_it():
    text = env_factory("openspiel:tic_tac_toe", {"render_mode": "ansi"})()
    text.reset(seed=0)
    text.step(4)
    assert text.render() == "...\n.x.\n..."
    picture = env_factory("openspiel:tic_tac_toe", {"render_mode": "rgb_array"})()
    picture.reset(seed=0)
    frame = picture.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    with pytest.raises(OpenSpielError, match="render_mode must be one of ansi, human, rgb_array"):
        env_factory("openspiel:tic_tac_toe", {"render_mode": "pixels"})

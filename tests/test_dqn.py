"""DQN: targets by hand, masks, exact state round trips, errors, and eval --vs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import Learner
from torch import nn

from interplay.algos.dqn import DQN, QNet, td_target
from interplay.cli import main
from interplay.config.loading import load
from interplay.config.model import ModelSettings
from interplay.config.validation import validate_section
from interplay.data.replay import Sample
from interplay.errors import ConfigError, NonFiniteError
from interplay.experiment.build import make_specs, make_vec_env
from interplay.experiment.evaluate import evaluate
from interplay.experiment.loop import Experiment, train
from interplay.experiment.run_store.statecodec import decode, encode
from interplay.run.actors import ActBatch

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
TTT = "pettingzoo.classic.tictactoe_v3"


class Table(nn.Module):
    """Q-values read from a table: the observation is a one-hot row index."""

    def __init__(self, values):
        super().__init__()
        self.values = torch.tensor(values, dtype=torch.float32)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return obs @ self.values


def sample_of(next_rows, reward, terminated, truncated, discount, next_mask=None) -> Sample:
    n = len(next_rows)
    onehot = np.eye(3, dtype=np.float32)[next_rows]
    return Sample(
        index=np.arange(n), obs=onehot, action=np.zeros(n, np.int64), mask=None,
        reward=np.asarray(reward, np.float64), next_obs=onehot,
        next_mask=None if next_mask is None else np.asarray(next_mask, bool),
        terminated=np.asarray(terminated, bool), truncated=np.asarray(truncated, bool),
        steps=np.ones(n, np.int64), discount=np.asarray(discount, np.float64),
    )


# -- targets ----------------------------------------------------------------------------------
def test_double_q_target_by_hand():
    online = Table([[1.0, 5.0, 3.0], [0.0, 0.0, 9.0], [2.0, 1.0, 0.0]])
    target = Table([[10.0, 20.0, 30.0], [-1.0, -2.0, -3.0], [7.0, 8.0, 9.0]])
    mask = [[1, 1, 1], [1, 1, 0], [1, 1, 1], [1, 0, 1], [0, 0, 0]]
    b = sample_of([0, 1, 2, 0, 0], reward=[1.0, 0.5, -1.0, 0.0, 2.0],
                  terminated=[False, False, True, False, False],
                  truncated=[False, True, False, False, True],
                  discount=[0.9, 0.5, 0.9, 0.81, 0.9], next_mask=mask)
    got = td_target(online, target, b, double=True, device="cpu").tolist()
    # row 0: online picks 1 -> target 20; row 1: 2 is illegal, online ties 0/1 -> first (0) -> -1
    # (truncated: still bootstrapped); row 2 terminated; row 3: 1 illegal, online picks 2 -> 30;
    # row 4: no legal action -> no bootstrap.
    assert got == pytest.approx([1 + 0.9 * 20, 0.5 + 0.5 * -1, -1.0, 0.81 * 30, 2.0])
    plain = td_target(online, target, b, double=False, device="cpu").tolist()
    # Without double Q the target picks its own best legal action.
    assert plain == pytest.approx([1 + 0.9 * 30, 0.5 + 0.5 * -1, -1.0, 0.81 * 30, 2.0])


def test_target_without_masks_uses_every_action():
    online, target = Table(np.eye(3) * 4), Table([[1.0, 2.0, 3.0]] * 3)
    b = sample_of([0, 2], reward=[0.0, 0.0], terminated=[False, False],
                  truncated=[False, False], discount=[1.0, 0.5])
    assert td_target(online, target, b, True, "cpu").tolist() == pytest.approx([1.0, 1.5])


def test_dueling_head_is_value_plus_centred_advantage():
    net = QNet(4, 3, ModelSettings(hidden=[8], activation="relu"), dueling=True)
    x = torch.randn(5, 4)
    h = net.trunk(x)
    a = net.advantage(h)
    assert torch.allclose(net(x), net.value(h) + a - a.mean(1, keepdim=True))
    assert QNet(4, 3, ModelSettings(hidden=[], activation="relu"), dueling=False)(x).shape == (5, 3)


# -- acting -----------------------------------------------------------------------------------
def make_dqn(extra=(), env=TTT, num_envs=2) -> tuple[DQN, dict]:
    cfg = load([], [f"env.id={env}", "algo.name=dqn", "train.self_play=true",
                    f"env.num_envs={num_envs}", *extra])
    vec, _ = make_vec_env(cfg)
    specs = make_specs(cfg, vec)
    vec.close()
    settings = validate_section(DQN.Settings, cfg.algo.model_dump(), "algo")
    return Learner(DQN(settings, specs, "cpu", cfg.train.seed), num_envs), specs


@pytest.mark.parametrize("epsilon", [0.0, 0.5, 1.0])
def test_actions_are_always_legal(epsilon):
    algo, _ = make_dqn([f"algo.epsilon_start={epsilon}", f"algo.epsilon_end={epsilon}"])
    actor = algo.actor("shared")
    rng = np.random.default_rng(0)
    mask = rng.random((2000, 9)) < 0.3
    mask[np.arange(2000), rng.integers(0, 9, 2000)] = True
    obs = rng.random((2000, 18)).astype(np.float32)
    for explore in (True, False):
        actions, _ = actor.act(ActBatch(obs=obs, mask=mask), explore)
        assert mask[np.arange(2000), actions].all()
    greedy, _ = actor.act(ActBatch(obs=obs, mask=mask), False)
    q = algo.policies["shared"].online(torch.as_tensor(obs)).detach().numpy()
    assert (greedy == np.where(mask, q, -np.inf).argmax(1)).all()


def test_epsilon_falls_linearly_over_the_steps():
    algo, _ = make_dqn(["algo.epsilon_start=1.0", "algo.epsilon_end=0.2",
                        "algo.exploration_steps=100"])
    seen = []
    for _ in range(150):
        seen.append(algo.epsilon())
        algo.ready(len(seen))  # one env step each
    assert seen[0] == 1.0 and seen[50] == pytest.approx(0.6) and seen[100:] == [pytest.approx(0.2)] * 50


# -- state ------------------------------------------------------------------------------------
def fill(algo: DQN, steps: int, seed: int = 0) -> None:
    """Random games of tic-tac-toe into ``algo``'s buffer through its own actor."""
    from interplay.run.runner import Runner

    cfg = load([], [f"env.id={TTT}", "train.self_play=true", "env.num_envs=2"])
    vec, copies = make_vec_env(cfg)
    runner = Runner(vec, make_specs(cfg, vec), {"shared": algo.actor("shared")}, {"shared"},
                    copies=copies)
    runner.reset(seed)
    for _ in range(steps):
        for pid, batch in runner.step().items():
            algo.collect(pid, batch)
        algo.ready(runner.env_steps)
    vec.close()


def test_state_round_trip_gives_the_same_next_actions_and_update():
    extra = ["algo.batch_size=16", "algo.learning_starts=0", "algo.n_step=2", "algo.target_every=2"]
    a, _ = make_dqn(extra)
    fill(a, 60)
    for _ in range(3):
        a.update()
    b, _ = make_dqn([*extra, "train.seed=7"])  # other init and RNGs, all overwritten by the load
    b.load_state_dict(decode(encode(a.state_dict())))
    rng = np.random.default_rng(5)
    obs = rng.random((64, 18)).astype(np.float32)
    mask = rng.random((64, 9)) < 0.5
    mask[:, 0] = True
    for explore in (True, False):
        assert (a.actor("shared").act(ActBatch(obs, mask), explore)[0]
                == b.actor("shared").act(ActBatch(obs, mask), explore)[0]).all()
    assert a.update() == b.update()
    for x, y in zip(a.policies["shared"].online.parameters(), b.policies["shared"].online.parameters(),
                    strict=True):
        assert torch.equal(x, y)
    assert a.schedule.env_steps == b.schedule.env_steps and a.epsilon() == b.epsilon()


def test_without_save_buffer_the_state_leaves_it_out():
    a, _ = make_dqn(["algo.save_buffer=false"])
    fill(a, 30)
    state = a.state_dict()
    assert state["storage"] is None
    b, _ = make_dqn(["algo.save_buffer=false"])
    b.load_state_dict(state)
    assert len(b.storage.buffers["shared"]) == 0 and b.schedule.env_steps == a.schedule.env_steps
    assert not b.ready()  # nothing to learn from until the buffer fills again


def test_the_target_network_follows_hard_or_soft():
    for tau in (1.0, 0.5):
        algo, _ = make_dqn(["algo.batch_size=8", "algo.target_every=1", f"algo.tau={tau}",
                            "algo.train_every=2",  # one round per step of the two copies
                            "algo.learning_starts=0"])
        fill(algo, 20)
        p = algo.policies["shared"]
        before = [t.clone() for t in p.target.parameters()]
        algo.update()
        for old, t, o in zip(before, p.target.parameters(), p.online.parameters(), strict=True):
            assert torch.allclose(t, old + tau * (o - old), atol=1e-6)


def test_a_nan_loss_names_the_policy_and_the_env_step():
    algo, _ = make_dqn(["algo.batch_size=8", "algo.learning_starts=0"])
    fill(algo, 20)
    algo.storage.buffers["shared"].reward[:] = np.nan
    with pytest.raises(NonFiniteError, match=r"policy 'shared'.*env step 40"):
        algo.update()


def test_settings_are_checked_with_the_nearest_key():
    with pytest.raises(ConfigError, match="algo.n_step"):
        make_dqn(["algo.n_setp=3"])
    with pytest.raises(ConfigError, match="algo.tau"):
        make_dqn(["algo.tau=0"])


def test_box_actions_are_refused_by_name():
    cfg = load([], ["env.id=mpe2.simple_spread_v3", "algo.name=dqn",
                    "env.kwargs.continuous_actions=true", *QUIET])
    with pytest.raises(ConfigError, match="dqn cannot train policy 'agent'.*box"):
        Experiment(cfg, "unused")


# -- learning and eval --vs ---------------------------------------------------------------------
CLAIM = ["env.id=duel_envs:first_to_claim", "env.kwargs.rounds=3", "env.num_envs=4"]


@pytest.fixture(scope="module")
def claim_dqn_run(tmp_path_factory):
    """DQN self-play on a game where claiming at once wins: learned in seconds."""
    run = tmp_path_factory.mktemp("claim")
    train(load([], [*CLAIM, "algo.name=dqn", "train.self_play=true", "train.steps=1600",
                    "algo.learning_starts=200", "algo.exploration_steps=800", "algo.train_every=4",
                    "algo.batch_size=32",
                    "algo.target_every=50", "algo.model.hidden=[32]", *QUIET]), run)
    return run


@pytest.fixture(scope="module")
def claim_random_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("claim_random")
    train(load([], [*CLAIM, "algo.name=random", "train.self_play=true", "train.steps=10", *QUIET]),
          run)
    return run


def test_vs_rates_are_exact_where_the_opponent_always_wins(claim_random_run):
    report = evaluate(claim_random_run, vs="duel_envs:always_claim", episodes=401)
    # Second to move against a player that claims at once: lost every time.
    assert report["episodes/player_1"] == 200 and report["loss_rate/player_1"] == 1.0
    # First to move, claiming at random: half won, half lost, never drawn.
    assert report["episodes/player_0"] == 201 and report["draw_rate/player_0"] == 0.0
    assert 0.4 < report["win_rate/player_0"] < 0.6
    assert report["win_rate"] + report["draw_rate"] + report["loss_rate"] == pytest.approx(1.0)
    assert report["loss_rate"] == pytest.approx((200 + 201 * report["loss_rate/player_0"]) / 401)
    # 95% Wilson intervals: 200 losses of 200 reach 1 but not below 98.1%; each holds its rate
    low, high = report["loss_ci95/player_1"]
    assert high == 1.0 and 0.98 < low < 0.985
    assert report["draw_ci95/player_0"][0] == 0.0 and report["draw_ci95/player_0"][1] < 0.02
    for key in ("win", "draw", "loss"):
        low, high = report[f"{key}_ci95"]
        assert low <= report[f"{key}_rate"] <= high and high - low < 0.1


def test_dqn_learns_to_claim_and_always_wins(claim_dqn_run):
    report = evaluate(claim_dqn_run, vs="duel_envs:always_pass", episodes=20)
    assert report["win_rate"] == 1.0
    report = evaluate(claim_dqn_run, vs="random", episodes=40)
    assert report["win_rate/player_0"] == 1.0 and report["loss_rate"] <= 0.5


def test_random_against_random_tic_tac_toe_lands_in_the_known_band(tmp_path):
    run = tmp_path / "ttt"
    train(load([], [f"env.id={TTT}", "algo.name=random", "train.self_play=true", "env.num_envs=8",
                    "train.steps=10", *QUIET]), run)
    code = main(["eval", str(run), "--vs", "random", "--episodes", "1000", "--seed", "3"])
    assert code == 0
    report = json.loads((run / "eval.json").read_text())
    # Random play: the first player wins 58.5%, the second 28.8%, 12.7% are drawn.
    assert report["win_rate/player_1"] == pytest.approx(0.585, abs=0.07)
    assert report["win_rate/player_2"] == pytest.approx(0.288, abs=0.07)
    assert report["draw_rate"] == pytest.approx(0.127, abs=0.05)
    assert report["win_rate"] == pytest.approx(report["loss_rate"], abs=0.07)


def test_vs_needs_two_players_and_an_importable_opponent(claim_random_run, tmp_path, capsys):
    code = main(["eval", str(claim_random_run), "--vs", "no_such_module:fn", "--trust"])
    assert code == 2 and "--vs" in capsys.readouterr().err
    run = tmp_path / "spread"
    train(load([], ["env.id=spread", "train.steps=10", *QUIET]), run)
    code = main(["eval", str(run), "--vs", "random"])
    assert code == 2 and "two-player" in capsys.readouterr().err


PRESETS = Path(__file__).resolve().parent.parent / "configs"


@pytest.mark.slow
@pytest.mark.learning
@pytest.mark.parametrize(("preset", "games", "min_win", "max_loss"), [
    ("dqn_tictactoe.yaml", 1000, 0.85, 0.02),
    ("dqn_connect_four.yaml", 500, 0.90, 1.0),
])
def test_self_play_presets_beat_random_on_both_seats(tmp_path, preset, games, min_win, max_loss,
                                                     learning_result):
    result = train(load([PRESETS / preset], QUIET), tmp_path)
    report = evaluate(tmp_path, vs="random", episodes=games)
    learning_result(env=preset, algo="dqn", steps=result.env_steps, score=report["win_rate"],
                    random="about 0.5 (random against random)")
    assert report["win_rate"] >= min_win and report["loss_rate"] <= max_loss, report

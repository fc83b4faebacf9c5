"""ISAC and MASAC: the squashed Gaussian's density, masks, soft targets by hand, entropy tuning,
the centralised critic's rows, exact resume with priorities, refusals, and one learning run."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from helpers import read_metrics
from test_maddpg import _RandomPolicies
from test_ppo import build as build_with
from test_ppo import checkpointed, drive, drive_twins, greedy_return

from interplay.algos.sac import (
    Draw,
    categorical,
    soft_target,
    soft_value,
    squashed_gaussian,
    weighted_mse,
)
from interplay.config.loading import load
from interplay.errors import ConfigError, NonFiniteError
from interplay.experiment.loop import Experiment, resume, train
from interplay.experiment.run_store.checkpoint import latest_valid, load_checkpoint
from interplay.run.actors import ActBatch

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
TIMING = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}
SPREAD = {"id": "spread", "num_envs": 3}
SPREAD_BOX = {**SPREAD, "kwargs": {"continuous_actions": True}}
SMALL = {"batch_size": 16, "learning_starts": 0, "model": {"hidden": [16]},
         "critic_model": {"hidden": [16]}}


def build(env: dict, algo: dict, seed: int = 0, **train_kw):
    """As test_ppo's, but each transition reaches the algorithm in the step it closes."""
    return build_with(env, algo, seed, **{"batch_mode": "truncate_episodes", **train_kw})


# -- the policy ------------------------------------------------------------------------------
def test_squashed_gaussian_log_density_matches_a_numeric_one():
    """The density of tanh(u), u ~ N(mean, std), is the chance of a small box around the action
    (from the Gaussian's CDF through atanh) divided by the box's volume."""
    gen = torch.Generator().manual_seed(0)
    mean = torch.randn(200, 3, generator=gen, dtype=torch.float64)
    log_std = torch.rand(200, 3, generator=gen, dtype=torch.float64) * 2 - 1.5
    noise = torch.randn(200, 3, generator=gen, dtype=torch.float64)
    action, log_prob = squashed_gaussian(mean, log_std, noise)
    assert (action.abs() < 1).all()
    h = 1e-6
    normal = torch.distributions.Normal(mean, log_std.exp())
    low = (action - h).clamp(-1 + 1e-12, 1 - 1e-12)
    high = (action + h).clamp(-1 + 1e-12, 1 - 1e-12)
    mass = normal.cdf(torch.atanh(high)) - normal.cdf(torch.atanh(low))
    numeric = (mass / (high - low)).log().sum(-1)
    torch.testing.assert_close(log_prob, numeric, rtol=1e-4, atol=1e-4)


def test_squashed_gaussian_stays_finite_where_tanh_rounds_to_one():
    mean = torch.tensor([[30.0, -30.0]])
    action, log_prob = squashed_gaussian(mean, torch.full((1, 2), -5.0), torch.zeros(1, 2))
    assert torch.isfinite(log_prob).all() and log_prob.item() > 50  # a very peaked density
    assert torch.equal(action.abs(), torch.ones(1, 2))


def test_categorical_gives_illegal_actions_no_probability_and_never_draws_them():
    rng = np.random.default_rng(0)
    logits = torch.randn(500, 6) * 5
    mask = torch.from_numpy(rng.random((500, 6)) < 0.4)
    mask[torch.arange(500), torch.from_numpy(rng.integers(6, size=500))] = True  # one legal each
    draw = categorical(logits, mask, rng)
    assert draw.probs is not None
    assert (draw.probs[~mask] == 0).all()
    torch.testing.assert_close(draw.probs.sum(-1), torch.ones(500))
    assert mask[draw.action.bool()].all()
    assert torch.isfinite(draw.entropy).all() and (draw.entropy <= mask.sum(-1).log() + 1e-5).all()


@pytest.mark.parametrize("algo", ["isac", "masac"])
def test_discrete_actors_never_choose_an_illegal_action(algo):
    _, learner, _ = build(SPREAD, {"name": algo, **SMALL})
    actor = learner.actor("agent")
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(300, 18)).astype(np.float32)
    mask = rng.random((300, 5)) < 0.3
    mask[np.arange(300), rng.integers(5, size=300)] = True
    for explore in (True, False):
        action, _ = actor.act(ActBatch(obs=obs, mask=mask), explore)
        assert mask[np.arange(300), action].all()
    greedy = [actor.act(ActBatch(obs=obs, mask=mask), False)[0] for _ in range(2)]
    np.testing.assert_array_equal(*greedy)  # not exploring: the most likely legal action


@pytest.mark.slow  # masked turn-based acting is in the quick suite's algorithm matrix
def test_isac_self_play_never_plays_an_illegal_move_in_tictactoe(tmp_path):
    cfg = load([], ["env.id=pettingzoo.classic.tictactoe_v3", "train.self_play=true",
                    "algo.name=isac", "algo.learning_starts=100", "algo.batch_size=32",
                    "env.num_envs=4", "train.steps=1200", "log.every=400", *QUIET])
    result = train(cfg, tmp_path)
    assert any("critic_loss/shared" in row for row in result.rows)
    for row in result.rows:
        # An illegal move costs the mover -1 with no +1 to the other: a legal game sums to 0.
        assert row["episode_return_min"] == 0 and row["episode_return_max"] == 0


def test_box_actions_are_squashed_and_greedy_ones_are_the_mean():
    _, learner, _ = build(SPREAD_BOX, {"name": "isac", **SMALL})
    actor, policy = learner.actor("agent"), learner.policies["agent"]
    obs = np.random.default_rng(2).normal(size=(64, 18)).astype(np.float32)
    drawn, _ = actor.act(ActBatch(obs=obs, mask=None), explore=True)
    greedy, _ = actor.act(ActBatch(obs=obs, mask=None), explore=False)
    assert drawn.shape == greedy.shape == (64, 5) and np.abs(drawn).max() <= 1.0
    with torch.no_grad():
        mean = policy.actor(torch.from_numpy(obs))[:, :5]
    np.testing.assert_allclose(greedy, np.tanh(mean.numpy()), rtol=1e-6)
    assert not np.allclose(drawn, greedy)


# -- targets ---------------------------------------------------------------------------------
def test_the_soft_target_takes_the_smaller_twin_less_alpha_log_pi():
    # Box: two critics' values of the next actions, the log-density of those actions.
    q = torch.tensor([[[2.0], [-1.0], [4.0]],
                      [[3.0], [-2.0], [1.0]]])  # [critics, b, 1]
    draw = Draw(torch.zeros(3, 1), torch.tensor([0.5, -1.0, 2.0]), None, torch.zeros(3))
    value = soft_value(q, 0.2, draw)
    torch.testing.assert_close(value, torch.tensor([2.0 - 0.1, -2.0 + 0.2, 1.0 - 0.4]))
    reward = torch.tensor([1.0, 0.0, -1.0])
    bootstrap = torch.tensor([True, True, False])  # the third row's episode terminated
    target = soft_target(reward, bootstrap, 0.9, value)
    torch.testing.assert_close(target, torch.tensor([1.0 + 0.9 * 1.9, 0.9 * -1.8, -1.0]))


def test_the_discrete_soft_value_is_the_expectation_under_the_policy():
    q = torch.tensor([[[1.0, 4.0, 0.0]],
                      [[2.0, 3.0, 5.0]]])  # [critics, b=1, 3 actions]
    probs = torch.tensor([[0.5, 0.5, 0.0]])  # the third action is illegal
    log_prob = torch.tensor([[math.log(0.5), math.log(0.5), -1e9]])
    draw = Draw(torch.zeros(1, 3), log_prob, probs, torch.zeros(1))
    by_hand = 0.5 * (1.0 - 0.1 * math.log(0.5)) + 0.5 * (3.0 - 0.1 * math.log(0.5))
    torch.testing.assert_close(soft_value(q, 0.1, draw), torch.tensor([by_hand]))


def test_importance_weights_scale_each_row_of_the_critic_loss():
    q, target = torch.tensor([1.0, 2.0]), torch.tensor([0.0, 0.0])
    assert weighted_mse(q, target, None).item() == pytest.approx(2.5)
    assert weighted_mse(q, target, torch.tensor([1.0, 0.5])).item() == pytest.approx(1.5)
    rows = weighted_mse(torch.ones(2, 3), torch.zeros(2, 3), torch.tensor([1.0, 0.0]))
    assert rows.item() == pytest.approx(0.5)  # a joint row's weight covers all its agents


def test_masac_critic_rows_hold_own_then_joint_observations_and_actions():
    _, learner, _ = build({"id": "speaker_listener", "num_envs": 2,
                           "kwargs": {"continuous_actions": True}}, {"name": "masac", **SMALL})
    obs = {"speaker": torch.full((4, 1, 3), 1.0), "listener": torch.full((4, 1, 11), 2.0)}
    act = {"speaker": torch.full((4, 1, 3), 3.0), "listener": torch.full((4, 1, 5), 4.0)}
    x = learner.critic_input("listener", obs, act, own=torch.full((4, 1, 5), 5.0))
    # own obs (11), own action (5), the joint obs (3 + 11), the joint actions (3 + 5)
    expected = [2.0] * 11 + [5.0] * 5 + [1.0] * 3 + [2.0] * 11 + [3.0] * 3 + [5.0] * 5
    torch.testing.assert_close(x, torch.tensor(expected).expand(4, 1, -1))
    # Several agents: row j has agent j's own action in both places, the others' as stored.
    _, spread, _ = build(SPREAD_BOX, {"name": "masac", **SMALL})
    act = {"agent": torch.arange(3.0).repeat_interleave(5).reshape(1, 3, 5)}
    obs = {"agent": torch.zeros(1, 3, 18)}
    x = spread.critic_input("agent", obs, act, own=torch.full((1, 3, 5), 9.0))
    for j in range(3):
        joint = x[0, j, -15:].reshape(3, 5)
        assert (x[0, j, 18:23] == 9.0).all() and (joint[j] == 9.0).all()
        assert all((joint[i] == i).all() for i in range(3) if i != j)
        torch.testing.assert_close(x[0, j, 23:26], torch.eye(3)[j])


def test_discrete_masac_asks_its_critics_once_for_each_own_action():
    _, learner, _ = build(SPREAD, {"name": "masac", **SMALL})
    p = learner.policies["agent"]
    rng = np.random.default_rng(0)
    obs = {"agent": torch.from_numpy(rng.normal(size=(4, 3, 18)).astype(np.float32))}
    act = {"agent": torch.nn.functional.one_hot(torch.from_numpy(rng.integers(5, size=(4, 3))),
                                                5).float()}
    with torch.no_grad():
        every = learner.critic_values("agent", p.critics, obs, act)  # [critics, b, agents, 5]
        taken = learner.taken_values("agent", obs, act)
        assert every.shape == (2, 4, 3, 5)
        for c in range(2):
            torch.testing.assert_close((every[c] * act["agent"]).sum(-1), taken[c])


# -- entropy tuning --------------------------------------------------------------------------
@pytest.mark.parametrize("env,scale,direction", [
    (SPREAD, 1.0, "up"),  # the target is log 5, the most a 5-way choice can have
    (SPREAD, 0.1, "down"),  # a fresh policy is near uniform: far above 0.1 log 5
    (SPREAD_BOX, 1.0, "down"),  # -5: a fresh squashed Gaussian is much wider
    (SPREAD_BOX, -1.0, "up"),  # +5: more than the 5 log 2 of uniform actions
])
def test_entropy_tuning_moves_alpha_towards_the_target(env, scale, direction):
    _, learner, runner = build(env, {"name": "isac", **SMALL, "target_entropy_scale": scale,
                                     "lr_alpha": 1e-2})
    drive(runner, learner, 30)
    alpha = learner.policies["agent"].alpha().item()
    assert (alpha > 0.2) if direction == "up" else (alpha < 0.2)


def test_a_fixed_alpha_stays_where_it_was_set():
    _, learner, runner = build(SPREAD_BOX, {"name": "masac", **SMALL, "learn_alpha": False,
                                            "alpha": 0.05})
    metrics = drive(runner, learner, 20)
    assert metrics and all(m["alpha/agent"] == pytest.approx(0.05) for m in metrics)


# -- state -----------------------------------------------------------------------------------
@pytest.mark.parametrize("env,algo", [(SPREAD, "masac"), (SPREAD_BOX, "isac")])
def test_state_dict_round_trip_gives_identical_actions_and_updates(env, algo):
    settings = {"name": algo, **SMALL, "train_every": 2, "gradient_steps": 2}
    _, first, runner = build(env, settings)
    drive(runner, first, 15)
    _, second, _ = build(env, settings, seed=99)
    second.load_state_dict(checkpointed(first.state_dict()))
    drive_twins(runner, first, second, 12)
    for name, net in first.policies["agent"].nets().items():
        if isinstance(net, torch.nn.Module):
            other = second.policies["agent"].nets()[name]
            assert all(torch.equal(a, b) for a, b in
                       zip(net.parameters(), other.parameters(), strict=True))


def _split_run_matches_straight(tmp_path, common: list[str]) -> list[dict]:
    train(load([], [*common, "train.steps=240"]), tmp_path / "straight")
    train(load([], [*common, "train.steps=120"]), tmp_path / "split")
    resume(tmp_path / "split", ["train.steps=240"])
    a = [{k: v for k, v in r.items() if k not in TIMING} for r in read_metrics(tmp_path / "straight")]
    b = [{k: v for k, v in r.items() if k not in TIMING} for r in read_metrics(tmp_path / "split")]
    assert a == b
    return a


@pytest.mark.parametrize("extra", [
    ["algo.name=isac", "env.id=pettingzoo.classic.tictactoe_v3", "train.self_play=true"],
    ["algo.name=masac", "env.id=spread", "env.kwargs.continuous_actions=true"],
], ids=["isac", "masac"])
def test_a_prioritised_run_resumes_exactly_with_its_priorities(tmp_path, extra):
    common = [*extra, "algo.prioritized=true", "algo.priority_beta_steps=200", "env.num_envs=3",
              "algo.learning_starts=30", "algo.train_every=3", "algo.batch_size=16",
              "algo.model.hidden=[16]", "algo.critic_model.hidden=[16]", "log.every=60", *QUIET]
    train(load([], [*common, "train.steps=120"]), tmp_path / "probe")
    state, _ = load_checkpoint(latest_valid(tmp_path / "probe"))
    assert "priorities" in repr(state["storage"])[:100_000]
    rows = _split_run_matches_straight(tmp_path, common)
    assert any(k.startswith("critic_loss") for r in rows for k in r)


# -- bad input -------------------------------------------------------------------------------
def test_masac_refuses_a_turn_based_env_before_any_step(tmp_path):
    cfg = load([], ["env.id=pettingzoo.classic.tictactoe_v3", "algo.name=masac", *QUIET])
    with pytest.raises(ConfigError, match=r"masac cannot learn from env .*tictactoe_v3.*turn-based"
                                          r".*needs every trained agent to act in every step"):
        Experiment(cfg, tmp_path / "run")


@pytest.mark.parametrize("override,message", [
    ("algo.learn_alfa=false", r"algo.learn_alfa: unknown key; did you mean algo.learn_alpha"),
    ("algo.tau=0", r"algo.tau"),
    ("algo.alpha=-1", r"algo.alpha"),
    ("algo.critic_model.grayscale=true", r"algo.critic_model.*set algo.model.grayscale"),
    ("algo.epsilon_end=0.1", r"algo.epsilon_end: unknown key"),  # a setting of DQN's
])
def test_bad_settings_are_named_by_their_dotted_key(override, message):
    with pytest.raises(ConfigError, match=message):
        load([], ["env.id=spread", "algo.name=isac", override, *QUIET])


def test_two_centralised_learners_in_one_run_are_refused(tmp_path):
    cfg = load([], ["env.id=speaker_listener", "env.kwargs.continuous_actions=true",
                    "algo.name=masac", "policies.speaker.algo={name: maddpg}", *QUIET])
    with pytest.raises(ConfigError, match="each have a centralised critic"):
        Experiment(cfg, tmp_path / "run")


def test_a_nan_loss_names_the_policy_and_the_env_step():
    _, learner, runner = build(SPREAD_BOX, {"name": "masac", **SMALL,
                                            "learning_starts": 10**9})
    drive(runner, learner, 5)
    learner.buffer.columns["agent"]["reward"][:] = np.nan
    with pytest.raises(NonFiniteError, match=r"policy 'agent': the masac critic loss is nan at "
                                             r"env step 15"):
        learner.update()


# -- other envs ------------------------------------------------------------------------------
@pytest.mark.parametrize("algo", ["isac", "masac"])
@pytest.mark.parametrize("continuous", [True, False])
def test_runs_on_mpe2_speaker_listener(tmp_path, algo, continuous):
    result = train(load([], [
        "env.id=mpe2.simple_speaker_listener_v4", f"env.kwargs.continuous_actions={continuous}",
        "env.num_envs=2", f"algo.name={algo}", "algo.learning_starts=50", "algo.batch_size=16",
        "algo.train_every=2", "train.steps=200", "log.every=100", *QUIET]), tmp_path)
    losses = [v for r in result.rows for k, v in r.items() if k.startswith("critic_loss/")]
    assert losses and all(math.isfinite(v) for v in losses)


# -- learning (slow) -------------------------------------------------------------------------
@pytest.mark.slow
def test_masac_learns_continuous_spread(learning_result):
    env = {"id": "spread", "num_envs": 16, "kwargs": {"continuous_actions": True}}
    _, algo, runner = build_with(env, {"name": "masac", "gamma": 0.95, "lr_actor": 1e-3,
                                       "lr_critic": 1e-3, "lr_alpha": 1e-3, "tau": 0.01,
                                       "learning_starts": 1600, "train_every": 16}, seed=0)
    random = greedy_return(env, _RandomPolicies(algo.specs))
    drive(runner, algo, 6250)  # 100k env steps, about a minute
    score = greedy_return(env, algo)
    learning_result(env="spread (continuous)", algo="masac", steps=100_000, score=score,
                    random=random)
    assert score > random + 6  # random: about -26

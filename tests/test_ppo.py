"""The PPO family (ippo, mappo): masks, the joint critic input, and state round trips in the
middle of a rollout. Every registered algorithm's runs on every kind of env are
tests/test_algo_matrix.py's."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from gymnasium import spaces
from helpers import QUIET, Learner

from interplay.algos import REGISTRY
from interplay.algos.onpolicy.samples import policy_samples
from interplay.algos.ppo import PPO
from interplay.config.loading import load
from interplay.config.validation import validate
from interplay.data.returns import gae
from interplay.envs.spaces import action_view
from interplay.errors import ConfigError
from interplay.experiment.build import make_actors, make_algorithm, make_specs, make_vec_env
from interplay.experiment.loop import train
from interplay.experiment.run_store.statecodec import decode, encode
from interplay.nets.distributions import ActionDist
from interplay.run.actors import ActBatch
from interplay.run.runner import Runner

FAST = {"rollout": 16, "epochs": 2, "minibatches": 2}


TOY_ENVS = {
    "spread": {"id": "spread", "num_envs": 8},
    "spread_continuous": {"id": "spread", "num_envs": 8, "kwargs": {"continuous_actions": True}},
    "speaker_listener": {"id": "speaker_listener", "num_envs": 8},
    "scripted_turn_game": {"id": "helpers:turn_game", "num_envs": 2},
}


def build(env: dict, algo: dict, seed: int = 0, policies: dict | None = None, **train_kw):
    cfg = validate({"env": env, "algo": algo, "train": {"seed": seed, **train_kw},
                    "policies": policies or {}, "log": {"console": False}})
    vec, copies = make_vec_env(cfg)
    specs = make_specs(cfg, vec)
    algorithm = Learner(make_algorithm(cfg, specs, "cpu"), vec.num_envs)
    runner = Runner(vec, specs, make_actors(cfg, specs, algorithm),
                    {p for p, s in specs.items() if s.trainable}, copies=copies,
                    complete_episodes=cfg.train.batch_mode == "complete_episodes")
    return cfg, algorithm, runner


def drive(runner: Runner, algo, steps: int, seed: int | None = 0) -> list[dict]:
    """The trainer's loop, bare: collect every step, update when ready."""
    if seed is not None:
        runner.reset(seed)
    metrics = []
    for _ in range(steps):
        for pid, batch in runner.step(explore=True).items():
            algo.collect(pid, batch)
        if algo.ready():
            metrics.append(algo.update())
    return metrics


# -- masks --------------------------------------------------------------------------------
def test_sampled_actions_respect_masks_and_their_log_probs_are_the_learners():
    rng = np.random.default_rng(0)
    for space in (spaces.Discrete(6), spaces.MultiDiscrete([3, 4, 2])):
        dist = ActionDist(action_view(space, "a"))
        logits = torch.randn(500, dist.net_out) * 5
        mask = rng.random((500, dist.net_out)) < 0.4
        for start, size in zip(np.cumsum([0, *dist.sizes[:-1]]), dist.sizes, strict=True):
            mask[np.arange(500), start + rng.integers(size, size=500)] = True  # one legal each
        for explore in (True, False):
            action, logp = dist.act(logits, mask, rng, explore)
            cols = action.reshape(500, -1)
            for j, start in enumerate(np.cumsum([0, *dist.sizes[:-1]])):
                assert mask[np.arange(500), start + cols[:, j]].all()
            want, entropy = dist.log_prob_entropy(logits, torch.from_numpy(mask),
                                                  torch.from_numpy(action))
            assert np.allclose(logp, want.numpy(), atol=1e-4)
            assert torch.isfinite(entropy).all()


def test_sampled_actions_follow_the_softmax():
    dist = ActionDist(action_view(spaces.Discrete(4), "a"))
    logits = torch.tensor([[2.0, 0.0, -1.0, 1.0]]).repeat(40_000, 1)
    mask = np.ones((40_000, 4), bool)
    mask[:, 2] = False
    action, _ = dist.act(logits, mask, np.random.default_rng(1), True)
    want = torch.softmax(logits[0].masked_fill(~torch.from_numpy(mask[0]), -1e9), 0).numpy()
    seen = np.bincount(action, minlength=4) / len(action)
    assert seen[2] == 0 and np.abs(seen - want).max() < 0.01


def test_a_masked_policy_never_plays_an_illegal_move_in_connect_four(tmp_path):
    cfg = load([], ["env.id=pettingzoo.classic.connect_four_v3", "algo.name=ippo",
                    "algo.rollout=32", "algo.epochs=2", "train.steps=1000", "log.every=500",
                    *QUIET])
    result = train(cfg, tmp_path)
    for row in result.rows:
        # An illegal move costs the mover -1 with no +1 to the other: the game stops being
        # zero-sum. A legal game sums to 0.
        assert row["episode_return_min"] == 0 and row["episode_return_max"] == 0


def test_gaussian_log_prob_matches_torch():
    dist = ActionDist(action_view(spaces.Box(-1, 1, (3,)), "a"))
    out = torch.cat([torch.randn(4, 3), torch.full((4, 3), -0.5)], dim=1)
    action, act_logp = dist.act(out, None, np.random.default_rng(0), True)
    action = torch.from_numpy(action)
    logp, entropy = dist.log_prob_entropy(out, None, action)
    assert np.allclose(act_logp, logp.numpy(), atol=1e-5)
    ref = torch.distributions.Normal(out[:, :3], out[:, 3:].exp())
    torch.testing.assert_close(logp, ref.log_prob(action).sum(1))
    torch.testing.assert_close(entropy, ref.entropy().sum(1))
    assert np.array_equal(dist.act(out, None, np.random.default_rng(0), False)[0], out[:, :3].numpy())


# -- the centralised critic -----------------------------------------------------------------
def test_mappo_critic_sees_every_agent_of_its_copy_at_that_step():
    _, algo, runner = build(TOY_ENVS["speaker_listener"], {"name": "mappo", **FAST})
    assert algo.joint_dim == 3 + 11
    runner.reset(0)
    for _ in range(30):  # past the end of the first episodes (25 steps)
        for pid, batch in runner.step().items():
            algo.collect(pid, batch)
        algo.ready()
    data = {pid: policy_samples(algo.policies[pid], algo.storage.rollout(pid))
            for pid in algo.trained}
    inputs = algo.critic_inputs(data)
    speaker, listener = data["speaker"], data["listener"]
    assert len(np.unique(listener.step)) == 25
    for t in np.unique(listener.step):
        s_rows = np.flatnonzero(speaker.step == t)
        l_rows = np.flatnonzero(listener.step == t)
        for key, x in (("obs", inputs["listener"].now), ("next_obs", inputs["listener"].next)):
            crit = x.take(torch.from_numpy(l_rows)).numpy()
            by_env = np.argsort(speaker.env[s_rows])
            np.testing.assert_array_equal(crit[:, :11], getattr(listener, key)[l_rows])
            np.testing.assert_array_equal(
                crit[:, 11:14], getattr(speaker, key)[s_rows][by_env][listener.env[l_rows]])
            np.testing.assert_array_equal(crit[:, 14:], getattr(listener, key)[l_rows])


def test_ippo_critic_sees_only_its_own_observation():
    _, algo, _ = build(TOY_ENVS["spread"], {"name": "ippo"})
    assert algo.joint_dim == 0
    net = algo.policies["agent"].critic.nets[0][0]
    assert net.in_features == 18


def test_per_agent_parameters_give_each_agent_its_own_networks():
    _, algo, runner = build(TOY_ENVS["spread"], {"name": "mappo", "share_params": False, **FAST})
    policy = algo.policies["agent"]
    assert policy.actor.agents == policy.critic.agents == 3
    before = policy.actor.net[0][0].weight.clone()  # [agents, out, in]
    drive(runner, algo, 32)  # the first episodes end at step 25
    after = policy.actor.net[0][0].weight
    assert all(not torch.equal(before[j], after[j]) for j in range(3))
    # Rows go to their own agent's network.
    obs = np.random.default_rng(0).normal(size=(3, 18)).astype(np.float32)
    actor = algo.actor("agent")
    with torch.no_grad():
        x = torch.from_numpy(policy.observe(obs))
        outs = [policy.actor.agent(j)(x[j:j + 1]) for j in range(3)]
        mixed = policy.actor(x, torch.tensor([0, 1, 2]))
    torch.testing.assert_close(mixed, torch.cat(outs))
    actions, extras = actor.act(ActBatch(obs=obs, mask=None, slot=np.arange(3)), explore=False)
    assert actions.shape == (3,) and extras["logp"].shape == (3,)


def test_a_policy_model_overrides_algo_model_and_unknown_policies_are_named():
    _, algo, _ = build(TOY_ENVS["speaker_listener"], {"name": "mappo",
                       "model": {"activation": "relu"}},
                       policies={"speaker": {"model": {"hidden": [8]}}})
    assert algo.policies["speaker"].actor.nets[0][0][0].out_features == 8
    assert isinstance(algo.policies["speaker"].actor.nets[0][0][1], torch.nn.ReLU)
    assert algo.policies["listener"].actor.nets[0][0][0].out_features == 64
    with pytest.raises(ConfigError, match=r"policies.speeker controls no agent"):
        build(TOY_ENVS["speaker_listener"], {"name": "mappo"},
              policies={"speeker": {"model": {"hidden": [8]}}})


def test_bad_settings_name_the_key():
    with pytest.raises(ConfigError, match=r"algo.ent_coeff: unknown key; did you mean algo.ent_coef"):
        build(TOY_ENVS["spread"], {"name": "ippo", "ent_coeff": 0.1})
    with pytest.raises(ConfigError, match=r"algo.minibatches"):
        build(TOY_ENVS["spread"], {"name": "ippo", "minibatches": 0})


def test_presets_differ_only_in_their_defaults():
    ippo, mappo = REGISTRY["ippo"], REGISTRY["mappo"]
    assert ippo.__bases__ == mappo.__bases__ == (PPO,)
    assert not ippo.Settings(name="ippo").centralised_critic
    assert mappo.Settings(name="mappo").centralised_critic


def test_learning_rate_falls_linearly_to_zero_over_lr_decay_steps():
    _, algo, runner = build(TOY_ENVS["spread"], {"name": "ippo", **FAST, "lr": 1e-3,
                                                 "lr_decay_steps": 32 * 8})  # 8 copies
    rates = [m["lr"] for m in drive(runner, algo, 16 * 3)]
    assert rates == pytest.approx([1e-3, 0.5e-3, 0.0])


def test_a_non_finite_loss_stops_the_update_naming_the_policy():
    _, algo, runner = build(TOY_ENVS["spread"], {"name": "ippo", **FAST, "rollout": 64})
    drive(runner, algo, 25)  # one whole episode, no update yet
    algo.storage.rollout("agent").reward[0, 0, 0] = np.nan
    with pytest.raises(FloatingPointError, match=r"policy 'agent': the PPO loss is nan"):
        algo.update()


# -- exact resume -----------------------------------------------------------------------------
def drive_twins(runner: Runner, first, second, steps: int) -> None:
    """Step with both algorithms' actors (checked to agree), feed both the same transitions,
    and check that they want to learn at the same steps and report the same updates."""
    for g in runner.groups:
        g.actor = Twin(first.actor(g.spec.id), second.actor(g.spec.id))
    for _ in range(steps):
        for pid, batch in runner.step(explore=True).items():
            first.collect(pid, batch)
            second.collect(pid, batch)
        ready = first.ready()
        assert second.ready() == ready
        if ready:
            assert first.update() == second.update()


class Twin:
    """Acts with one actor and checks that another gives the very same actions and extras."""

    def __init__(self, main, other):
        self.main, self.other = main, other
        self.squashed, self.wants_env_obs = main.squashed, main.wants_env_obs

    def act(self, batch, explore):
        a, extras = self.main.act(batch, explore)
        b, other = self.other.act(batch, explore)
        np.testing.assert_array_equal(a, b)
        for k in extras:
            np.testing.assert_array_equal(extras[k], other[k])
        return a, extras


def checkpointed(state: dict) -> dict:
    """``state`` after the trip through a checkpoint file."""
    buf = io.BytesIO()
    torch.save(encode(state), buf)
    buf.seek(0)
    return decode(torch.load(buf, weights_only=True))


@pytest.mark.parametrize("env_name,algo", [
    ("spread", {"name": "mappo", "norm_value": True}),
    ("spread_continuous", {"name": "ippo", "share_params": False}),
    ("scripted_turn_game", {"name": "ippo"}),
])
def test_state_dict_round_trip_continues_exactly(env_name, algo):
    algo = {**algo, **FAST, "rollout": 10}
    _, first, runner = build(TOY_ENVS[env_name], algo)
    drive(runner, first, 25)  # two updates and half a rollout
    _, second, _ = build(TOY_ENVS[env_name], algo, seed=99)
    second.load_state_dict(checkpointed(first.state_dict()))
    drive_twins(runner, first, second, 20)
    for pid in first.policies:
        for a, b in zip(first.policies[pid].actor.parameters(),
                        second.policies[pid].actor.parameters(), strict=True):
            assert torch.equal(a, b)


# -- learning (slow) ------------------------------------------------------------------------
def greedy_return(runner_env: dict, algo, episodes: int = 100) -> float:
    cfg = validate({"env": {**runner_env, "num_envs": 20}})
    vec, copies = make_vec_env(cfg)
    specs = make_specs(cfg, vec)
    runner = Runner(vec, specs, {pid: algo.actor(pid) for pid in specs}, copies=copies)
    runner.reset(123)
    while runner.episodes < episodes:
        runner.step(explore=False)
    summary = runner.window.summary()
    return float(np.mean([v for k, v in summary.items() if k.startswith("agent_return_mean/")]))


@pytest.mark.slow
@pytest.mark.parametrize("algo_name", [pytest.param("ippo", marks=pytest.mark.learning), "mappo"])
def test_spread_beats_random(algo_name, learning_result):
    env = {"id": "spread", "num_envs": 128}
    _, algo, runner = build(env, {"name": algo_name}, seed=3)
    drive(runner, algo, 100 * 40)  # 512k env steps, about a minute
    score = greedy_return(env, algo)
    learning_result(env="spread", algo=algo_name, steps=512_000, score=score, random=-26.4)
    assert score > -22.0  # random: -26.4


@pytest.mark.slow
@pytest.mark.learning
def test_speaker_listener_beats_random(learning_result):
    env = {"id": "speaker_listener", "num_envs": 128}
    _, algo, runner = build(env, {"name": "mappo", "ent_coef": 0.0}, seed=3)
    drive(runner, algo, 100 * 40)
    score = greedy_return(env, algo)
    learning_result(env="speaker_listener", algo="mappo", steps=512_000, score=score,
                    random=-40.8)
    assert score > -30.0  # random: -40.8


@pytest.mark.slow
@pytest.mark.learning
def test_continuous_spread_beats_random(learning_result):
    env = {"id": "spread", "num_envs": 128, "kwargs": {"continuous_actions": True}}
    _, algo, runner = build(env, {"name": "ippo"}, seed=3)
    drive(runner, algo, 100 * 40)
    score = greedy_return(env, algo)
    learning_result(env="spread (continuous)", algo="ippo", steps=512_000, score=score,
                    random=-25.5)
    assert score > -22.0  # random: -25.5


@pytest.mark.slow
def test_turn_based_connect_four_beats_a_random_opponent(learning_result):
    cfg = validate({
        "env": {"id": "pettingzoo.classic.connect_four_v3", "num_envs": 16},
        "algo": {"name": "ippo", "rollout": 64},
        "policies": {"me": {"agents": ["player_0"]},
                     "other": {"agents": ["player_1"], "type": "random"}},
        "train": {"seed": 3},
    })
    vec, copies = make_vec_env(cfg)
    specs = make_specs(cfg, vec)
    algo = Learner(make_algorithm(cfg, specs, "cpu"), vec.num_envs)
    actors = make_actors(cfg, specs, algo)
    drive(Runner(vec, specs, actors, {"me"}, copies=copies), algo, 64 * 50)  # 51k moves
    runner = Runner(vec, specs, actors, copies=copies)
    runner.reset(123)
    while runner.episodes < 200:
        runner.step(explore=False)
    score = runner.window.summary()["policy_return_mean/me"]
    learning_result(env="connect_four_v3 vs random", algo="ippo", steps=64 * 50 * 16,
                    score=score, random=0.1)
    assert score > 0.5  # a random first player: about 0.1


def test_advantages_reusing_next_values_equal_valuing_every_next_observation():
    for name in ("ippo", "mappo"):
        _, algo, runner = build(TOY_ENVS["spread"], {"name": name, **FAST, "rollout": 64,
                                                     "norm_adv": False})
        drive(runner, algo, 60)  # two whole episodes per copy, inside the first rollout
        data = {pid: policy_samples(algo.policies[pid], algo.storage.rollout(pid))
                for pid in algo.trained}
        d, p, inputs = data["agent"], algo.policies["agent"], algo.critic_inputs(data)["agent"]
        adv, target, _, _ = algo.advantages("agent", d, inputs)
        x, nx = inputs.now, inputs.next
        r, at = d.rollout, d.at
        value, next_value = np.zeros(r.valid.shape), np.zeros(r.valid.shape)
        value[at] = algo.values(p, x, d.slot)
        next_value[at] = algo.values(p, nx, d.slot)  # every next observation, valued
        chained = np.zeros_like(r.valid)
        chained[:-1] = r.valid[1:] & ~(r.terminated | r.truncated)[:-1]
        want_adv, want_ret = gae(r.reward, value, next_value, r.terminated, chained,
                                 algo.settings.gamma, algo.settings.gae_lambda)
        want_adv, want_ret = want_adv[at], want_ret[at]
        np.testing.assert_allclose(adv, want_adv, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(target, want_ret, rtol=1e-6, atol=1e-6)

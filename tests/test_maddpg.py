"""MADDPG and MATD3: critic targets by hand, Gumbel-softmax, noise, joint rows, exact state round
trips, errors, and one learning run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import read_metrics
from test_ppo import build as build_with
from test_ppo import checkpointed, drive, drive_twins, greedy_return
from torch import nn

from interplay.algos.maddpg import (
    critic_target,
    gumbel_softmax,
    smoothed,
)
from interplay.algos.offpolicy import follow
from interplay.config.loading import load
from interplay.envs.toy import Move, ScriptedTurnGame
from interplay.errors import ConfigError, NonFiniteError
from interplay.experiment.loop import Experiment, resume, train
from interplay.run.actors import ActBatch, RandomActor
from interplay.run.transitions import Transitions

PRESETS = Path(__file__).resolve().parent.parent / "configs"
QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


def build(env: dict, algo: dict, seed: int = 0, **train_kw):
    """As test_ppo's, but each transition reaches the algorithm in the step it closes."""
    return build_with(env, algo, seed, **{"batch_mode": "truncate_episodes", **train_kw})


SL = {"id": "speaker_listener", "num_envs": 4, "kwargs": {"continuous_actions": True}}
SPREAD = {"id": "spread", "num_envs": 3, "kwargs": {"continuous_actions": True}}
SMALL = {"batch_size": 16, "learning_starts": 0, "model": {"hidden": [16]},
         "critic_model": {"hidden": [16]}}


class Linear(nn.Module):
    """Q = x @ w: a critic whose values are easy to work out by hand."""

    def __init__(self, w):
        super().__init__()
        self.w = torch.tensor(w, dtype=torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w[:, None]


# -- targets ----------------------------------------------------------------------------------
def test_critic_target_takes_the_smaller_twin_and_bootstraps_through_truncation():
    critics = nn.ModuleList([Linear([1.0, 0.0]), Linear([0.0, 1.0])])
    next_x = torch.tensor([[2.0, 5.0], [4.0, -1.0], [3.0, 3.0], [7.0, 9.0]])
    reward = torch.tensor([1.0, 0.0, -1.0, 0.5])
    # Row 1 was truncated: its flag is not ``terminated``, so it still bootstraps.
    terminated = torch.tensor([False, False, True, False])
    got = critic_target(critics, next_x, reward, terminated, gamma=0.9)
    assert got.tolist() == pytest.approx([1 + 0.9 * 2, 0.9 * -1, -1.0, 0.5 + 0.9 * 7])
    single = critic_target(critics[1:], next_x, reward, terminated, gamma=0.5)
    assert single.tolist() == pytest.approx([1 + 0.5 * 5, 0.5 * -1, -1.0, 0.5 + 0.5 * 9])


def test_target_smoothing_noise_is_clipped_and_actions_stay_in_bounds():
    action = torch.tensor([[0.0, 0.95, -0.95]] * 2000)
    got = smoothed(action, scale=1.0, clip=0.3, rng=np.random.default_rng(4))
    noise = np.random.default_rng(4).standard_normal(action.shape).astype(np.float32)
    want = (action + torch.from_numpy(noise).clamp(-0.3, 0.3)).clamp(-1, 1)
    torch.testing.assert_close(got, want)
    assert got[:, 0].abs().max() == pytest.approx(0.3) and got.max() == 1.0 and got.min() == -1.0
    assert smoothed(action, 0.0, 0.3, np.random.default_rng(4)) is action


def test_matd3_targets_on_a_batch_match_the_formula():
    _, algo, runner = build(SL, {"name": "matd3", **SMALL})
    drive(runner, algo, 10)
    _, rows, _ = algo.buffer.sample(8, np.random.default_rng(0))
    batch = algo._tensors(rows)
    algo.sample_rng = np.random.default_rng(1)
    next_act = algo._target_actions(batch)
    noise_rng = np.random.default_rng(1)
    for pid in algo.trained:  # the target actions: target actor plus clipped noise, in order
        p = algo.policies[pid]
        raw = p.actor_target(batch[pid].next_obs)
        noise = noise_rng.standard_normal(raw.shape).astype(np.float32) * 0.2
        want = (raw + torch.from_numpy(noise).clamp(-0.5, 0.5)).clamp(-1, 1)
        torch.testing.assert_close(next_act[pid], want)
    p = algo.policies["listener"]
    x = algo.critic_input("listener", {q: batch[q].next_obs for q in algo.trained}, next_act)
    q1, q2 = (c(x).squeeze(-1) for c in p.critic_targets)
    done = batch["listener"].terminated
    want = batch["listener"].reward + 0.95 * torch.where(done, 0.0, torch.minimum(q1, q2))
    got = critic_target(p.critic_targets, x, batch["listener"].reward, done, 0.95)
    torch.testing.assert_close(got, want)


def test_critic_rows_hold_own_then_joint_observations_and_actions():
    _, algo, _ = build(SPREAD, {"name": "maddpg"})
    b, k, d, a = 2, 3, 18, 5
    obs = {"agent": torch.arange(b * k * d, dtype=torch.float32).reshape(b, k, d)}
    act = {"agent": -torch.arange(b * k * a, dtype=torch.float32).reshape(b, k, a)}
    x = algo.critic_input("agent", obs, act)
    assert x.shape == (b, k, d + a + k + k * d + k * a)
    for j in range(k):
        row = x[:, j]
        torch.testing.assert_close(row[:, :d], obs["agent"][:, j])
        torch.testing.assert_close(row[:, d:d + a], act["agent"][:, j])
        torch.testing.assert_close(row[:, d + a:d + a + k], torch.eye(k)[j].expand(b, k))
        torch.testing.assert_close(row[:, d + a + k:d + a + k + k * d], obs["agent"].reshape(b, -1))
        torch.testing.assert_close(row[:, -k * a:], act["agent"].reshape(b, -1))
    own = torch.full((b, k, a), 7.0)
    y = algo.critic_input("agent", obs, act, own)
    for j in range(k):  # agent j's row: its own action replaced in both places, others kept
        joint = act["agent"].clone()
        joint[:, j] = 7.0
        torch.testing.assert_close(y[:, j, d:d + a], own[:, j])
        torch.testing.assert_close(y[:, j, -k * a:], joint.reshape(b, -1))


# -- discrete actions ---------------------------------------------------------------------------
def test_gumbel_softmax_is_one_hot_legal_and_passes_gradients():
    logits = torch.tensor([[2.0, 0.0, 1.0, -1.0]] * 4000, requires_grad=True)
    mask = torch.tensor([[True, False, True, True]] * 4000)
    sample = gumbel_softmax(logits, mask, 1.0, np.random.default_rng(0))
    assert torch.equal(sample.detach().sum(1), torch.ones(4000))
    assert sample.detach()[:, 1].sum() == 0
    freq = sample.detach().mean(0).numpy()
    legal = np.exp([2.0, 1.0, -1.0]) / np.exp([2.0, 1.0, -1.0]).sum()
    np.testing.assert_allclose(freq[[0, 2, 3]], legal, atol=0.03)
    (sample * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    assert logits.grad.abs().sum() > 0 and logits.grad[:, 1].abs().max() == 0


def test_discrete_actions_respect_masks_exploring_or_not():
    _, algo, _ = build({"id": "spread", "num_envs": 2}, {"name": "maddpg"})
    actor = algo.actor("agent")
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((3000, 18)).astype(np.float32)
    mask = rng.random((3000, 5)) < 0.4
    mask[np.arange(3000), rng.integers(0, 5, 3000)] = True
    for explore in (True, False):
        actions, _ = actor.act(ActBatch(obs=obs, mask=mask), explore)
        assert actions.dtype == np.int64 and mask[np.arange(3000), actions].all()
    greedy, _ = actor.act(ActBatch(obs=obs, mask=mask), False)
    logits = algo.policies["agent"].actor(torch.from_numpy(obs)).detach().numpy()
    assert (greedy == np.where(mask, logits, -np.inf).argmax(1)).all()


def test_discrete_updates_reach_the_actor_through_the_critic():
    _, algo, runner = build({"id": "speaker_listener", "num_envs": 4}, {"name": "maddpg", **SMALL})
    before = [t.clone() for t in algo.policies["speaker"].actor.parameters()]
    metrics = drive(runner, algo, 12)
    assert metrics and all(np.isfinite(v) for m in metrics for v in m.values())
    after = list(algo.policies["speaker"].actor.parameters())
    assert any(not torch.equal(x, y) for x, y in zip(before, after, strict=True))


# -- targets follow, noise explores ------------------------------------------------------------
def test_a_target_follows_its_online_network_by_tau():
    torch.manual_seed(0)
    online, target = nn.Linear(3, 2), nn.Linear(3, 2)
    old = [t.clone() for t in target.parameters()]
    follow(target, online, 0.25)
    for t, o, before in zip(target.parameters(), online.parameters(), old, strict=True):
        torch.testing.assert_close(t, before + 0.25 * (o - before))


def test_targets_move_only_on_delayed_actor_steps():
    _, algo, runner = build(SL, {"name": "matd3", **SMALL, "tau": 0.5, "learning_starts": 10**9})
    drive(runner, algo, 6)  # collect only
    p = algo.policies["listener"]
    frozen = [t.clone() for t in p.actor_target.parameters()]
    actor = [t.clone() for t in p.actor.parameters()]
    assert "actor_loss/listener" not in algo.update()  # gradient step 1: critics only
    assert all(torch.equal(a, b) for a, b in zip(frozen, p.actor_target.parameters(), strict=True))
    assert all(torch.equal(a, b) for a, b in zip(actor, p.actor.parameters(), strict=True))
    assert "actor_loss/listener" in algo.update()  # gradient step 2: actor, then targets halfway
    for t, old, o in zip(p.actor_target.parameters(), frozen, p.actor.parameters(), strict=True):
        torch.testing.assert_close(t, old + 0.5 * (o - old))
    assert any(not torch.equal(a, b) for a, b in zip(actor, p.actor.parameters(), strict=True))


def test_ou_noise_has_the_process_statistics_and_restarts_per_copy():
    theta, dt, sigma = 0.5, 1.0, 0.2
    _, algo, _ = build(SPREAD, {"name": "matd3", "noise": "ou", "ou_theta": theta, "ou_dt": dt,
                                "noise_scale": sigma})
    p = algo.policies["agent"]
    rows = ActBatch(obs=np.zeros((6, 18), np.float32), mask=None, slot=np.tile(np.arange(3), 2),
                    env=np.repeat([0, 1], 3))
    xs = np.stack([algo.noise(p, rows).copy() for _ in range(20_000)])  # [t, rows, dims]
    flat = xs[100:].reshape(len(xs) - 100, -1)
    var = sigma**2 * dt / (1 - (1 - theta * dt) ** 2)
    assert flat.mean() == pytest.approx(0.0, abs=0.01)
    assert flat.var() == pytest.approx(var, rel=0.05)
    lag1 = (flat[1:] * flat[:-1]).mean() / flat.var()
    assert lag1 == pytest.approx(1 - theta * dt, abs=0.03)
    # the episode of copy 1's agent 2 ends: only its process restarts from zero
    before = p.ou.copy()
    t = Transitions(obs=np.zeros((1, 18), np.float32), action=np.zeros((1, 5), np.float32),
                    reward=np.zeros(1), next_obs=np.zeros((1, 18), np.float32),
                    terminated=np.zeros(1, bool), truncated=np.ones(1, bool), env=np.array([1]),
                    slot=np.array([2]), mask=None, next_mask=None, extras={},
                    step=np.zeros(1, np.int64))
    algo.collect("agent", t)
    assert (p.ou[1, 2] == 0).all()
    np.testing.assert_array_equal(np.delete(p.ou.reshape(6, -1), 5, 0),
                                  np.delete(before.reshape(6, -1), 5, 0))


def test_gaussian_noise_scale_decays_linearly_and_actions_stay_squashed():
    _, algo, runner = build(SL, {"name": "maddpg", "noise_scale": 0.6, "noise_scale_end": 0.2,
                                 "noise_decay_steps": 100, "learning_starts": 10**9})
    seen = []
    for _ in range(150):
        seen.append(algo.noise_scale())
        algo.ready(len(seen))  # one env step each
    assert seen[0] == 0.6 and seen[50] == pytest.approx(0.4) and seen[100:] == [pytest.approx(0.2)] * 50
    obs = np.random.default_rng(0).standard_normal((500, 11)).astype(np.float32)
    actions, _ = algo.actor("listener").act(ActBatch(obs=obs, mask=None), explore=True)
    assert actions.shape == (500, 5) and np.abs(actions).max() <= 1.0
    assert algo.actor("listener").squashed


# -- joint rows ----------------------------------------------------------------------------------
def test_joint_rows_pair_each_copy_s_agents_across_policies():
    _, algo, runner = build(SL, {"name": "maddpg", "learning_starts": 10**9})
    runner.reset(0)
    seen = []
    for _ in range(3):
        closed = runner.step()
        seen.append(closed)
        for pid in ("listener", "speaker"):  # any order of policies
            algo.collect(pid, closed[pid])
        algo.ready()
    assert len(algo.buffer) == 3 * 4
    rows = algo.buffer.gather(np.arange(12))
    for t, closed in enumerate(seen):
        for pid, batch in closed.items():
            got = rows[pid]
            at = t * 4 + batch.env
            np.testing.assert_array_equal(got.obs[at, batch.slot], batch.obs)
            np.testing.assert_array_equal(got.next_obs[at, batch.slot], batch.next_obs)
            np.testing.assert_array_equal(got.action[at, batch.slot], batch.action)
            np.testing.assert_array_equal(got.reward[at, batch.slot], batch.reward)
            assert got.present[at].all()


def test_an_agent_missing_from_a_step_is_named():
    _, algo, runner = build(SPREAD, {"name": "maddpg"})
    runner.reset(0)
    closed = runner.step()["agent"]
    keep = ~((closed.env == 2) & (closed.slot == 1))
    algo.collect("agent", closed.select(keep))
    with pytest.raises(ConfigError, match=r"agent 'agent_1' \(policy 'agent'\).*env copy 2"):
        algo.ready()


def _turns() -> ScriptedTurnGame:
    return ScriptedTurnGame(n_agents=2, plan=[Move(rewards={"player_0": 1.0})] * 6)


def test_turn_based_envs_are_refused_before_learning_goes_wrong(tmp_path):
    cfg = load([], ["env.id=test_maddpg:_turns", "algo.name=matd3", "train.steps=20", *QUIET])
    with pytest.raises(ConfigError, match="needs every trained agent to act in every step"):
        train(cfg, tmp_path)


# -- state ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("env,algo", [
    (SPREAD, {"name": "matd3", "noise": "ou"}),
    ({"id": "speaker_listener", "num_envs": 3}, {"name": "maddpg"}),
])
def test_state_dict_round_trip_gives_identical_actions_and_updates(env, algo):
    algo = {**algo, **SMALL, "train_every": 2, "gradient_steps": 3}
    _, first, runner = build(env, algo)
    drive(runner, first, 15)
    _, second, _ = build(env, algo, seed=99)
    second.load_state_dict(checkpointed(first.state_dict()))
    drive_twins(runner, first, second, 12)
    for pid in first.policies:
        for name, net in first.policies[pid].nets().items():
            if isinstance(net, nn.Module):
                other = second.policies[pid].nets()[name]
                assert all(torch.equal(a, b) for a, b in
                           zip(net.parameters(), other.parameters(), strict=True))


def test_without_save_buffer_the_state_leaves_it_out():
    _, algo, runner = build(SL, {"name": "maddpg", **SMALL, "save_buffer": False})
    drive(runner, algo, 8)
    state = algo.state_dict()
    assert state["storage"] is None
    _, other, _ = build(SL, {"name": "maddpg", **SMALL, "save_buffer": False})
    other.load_state_dict(state)
    assert len(other.buffer) == 0 and other.schedule.env_steps == algo.schedule.env_steps
    assert not other.ready()


def test_resume_continues_exactly(tmp_path):
    common = ["env.id=speaker_listener", "env.kwargs.continuous_actions=true", "env.num_envs=2",
              "algo.name=matd3", "algo.noise=ou", "algo.batch_size=16", "algo.learning_starts=40",
              "algo.train_every=2",
              "algo.model.hidden=[16]", "algo.critic_model.hidden=[16]", "log.every=50", *QUIET]
    train(load([], [*common, "train.steps=200"]), tmp_path / "straight")
    train(load([], [*common, "train.steps=100"]), tmp_path / "split")
    resume(tmp_path / "split", ["train.steps=200"])
    timing = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}
    a, b = read_metrics(tmp_path / "straight"), read_metrics(tmp_path / "split")
    assert [{k: v for k, v in r.items() if k not in timing} for r in a] == \
           [{k: v for k, v in r.items() if k not in timing} for r in b]
    assert "critic_loss/listener" in a[-1]


# -- bad input ----------------------------------------------------------------------------------
def test_a_nan_loss_names_the_policy_the_tensor_and_the_env_step():
    _, algo, runner = build(SL, {"name": "maddpg", **SMALL, "learning_starts": 10**9})
    drive(runner, algo, 5)
    algo.buffer.columns["speaker"]["reward"][:] = np.nan
    with pytest.raises(NonFiniteError, match=r"policy 'speaker': the maddpg critic loss is nan at "
                                             r"env step 20"):
        algo.update()


@pytest.mark.parametrize("override,key", [
    ("algo.polcy_delay=2", "algo.policy_delay"),
    ("algo.tau=0", "algo.tau"),
    ("algo.noise=pink", "algo.noise"),
    ("algo.train_every=0", "algo.train_every"),
    ("algo.model.hiden=[8]", "algo.model.hidden"),
])
def test_bad_settings_are_named_by_their_dotted_key(override, key, tmp_path):
    cfg = ["env.id=spread", "algo.name=matd3", override, *QUIET]
    with pytest.raises(ConfigError, match=key):
        train(load([], cfg), tmp_path)


@pytest.mark.parametrize("preset", ["matd3_spread.yaml", "matd3_speaker_listener.yaml"])
def test_presets_build_matd3_on_continuous_actions(preset, tmp_path):
    exp = Experiment(load([PRESETS / preset], QUIET), tmp_path)
    try:
        assert exp.algo.name == "matd3"
        assert all(s.action_view.kind == "box" for s in exp.specs.values())
    finally:
        exp.close()


def test_matd3_is_maddpg_with_the_td3_flags():
    from interplay.algos.maddpg import MADDPGSettings, MATD3Settings

    a, b = MADDPGSettings(name="maddpg"), MATD3Settings(name="matd3")
    diff = {k for k in a.model_dump() if a.model_dump()[k] != b.model_dump()[k]}
    assert diff == {"name", "twin_critics", "target_noise", "policy_delay"}
    assert (b.twin_critics, b.policy_delay, b.target_noise) == (True, 2, 0.2)


# -- learning (slow) ---------------------------------------------------------------------------------
class _RandomPolicies:
    """``algo.actor`` for uniformly random Box actions, to measure the baseline the same way."""

    def __init__(self, specs):
        self.actors = {pid: RandomActor(spec, np.random.default_rng(0)) for pid, spec in specs.items()}

    def actor(self, pid):
        return self.actors[pid]


@pytest.mark.slow
def test_matd3_learns_continuous_speaker_listener(learning_result):
    env = {"id": "speaker_listener", "num_envs": 16, "kwargs": {"continuous_actions": True}}
    # One learning round per step of the 16 copies, from 1600 env steps on.
    _, algo, runner = build_with(env, {"name": "matd3", "learning_starts": 1600, "train_every": 16},
                                 seed=3)  # whole episodes, the default
    random = greedy_return(env, _RandomPolicies(algo.specs))
    drive(runner, algo, 6000)  # 96k env steps, about a minute and a half
    score = greedy_return(env, algo)
    learning_result(env="speaker_listener (continuous)", algo="matd3", steps=96_000,
                    score=score, random=random)
    assert score > random + 15  # random: about -41


def test_whole_episodes_handed_over_at_their_end_make_the_same_joint_rows():
    buffers = []
    for mode in ("truncate_episodes", "complete_episodes"):
        _, algo, runner = build(SL, {"name": "maddpg", "learning_starts": 10**9}, batch_mode=mode)
        drive(runner, algo, 30)  # the first episodes end at step 25
        buffers.append(algo.buffer)
    step_by_step, whole = buffers
    assert len(whole) == 25 * 4 and len(step_by_step) == 30 * 4
    a, b = step_by_step.gather(np.arange(100)), whole.gather(np.arange(100))
    for pid in a:
        for key in ("obs", "action", "reward", "next_obs", "terminated", "truncated", "present"):
            np.testing.assert_array_equal(getattr(a[pid], key), getattr(b[pid], key))


@pytest.mark.parametrize(("old", "new"), [("learning_delay", "learning_starts"),
                                          ("learn_step", "train_every")])
def test_the_old_names_of_the_replay_schedule_are_refused_with_the_new_one(old, new):
    from interplay.config.loading import load
    from interplay.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"algo\.{old}: this setting is now algo\.{new}"):
        load([], ["algo.name=maddpg", f"algo.{old}=10"])

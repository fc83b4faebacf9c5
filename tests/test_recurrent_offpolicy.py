"""Recurrent Q-learners (DQN, VDN, QMIX with ``model.recurrent``): replay keeps the state each
action was taken from, sequences stay in one episode and learn nothing from their burn-in,
runs resume exactly, and a loaded policy carries its state between calls."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import assert_same_state, newest_state, read_metrics, tiny_cfg, untimed_metrics

import interplay
from interplay.algos.dqn import DQN, DQNSettings
from interplay.config.model import ModelSettings
from interplay.data.replay import ReplayBuffer
from interplay.data.sequences import windows
from interplay.errors import ConfigError
from interplay.experiment.build import make_specs, make_vec_env
from interplay.experiment.loop import train
from interplay.experiment.run_store.statecodec import decode
from interplay.run.transitions import Transitions

STATE = 3


def _stream_rows(episodes: list[int], env: int, slot: int) -> list[Transitions]:
    """One stream's transitions, one per call: obs holds (episode, step in it, env, slot)."""
    out = []
    for ep, length in enumerate(episodes):
        for t in range(length):
            obs = np.array([[ep, t, env, slot]], np.float32)
            out.append(Transitions(
                obs=obs, action=np.zeros(1, np.int64), reward=np.array([float(t)]),
                next_obs=obs + np.array([0, 1, 0, 0], np.float32),
                terminated=np.array([t == length - 1]), truncated=np.zeros(1, bool),
                env=np.array([env]), slot=np.array([slot]), mask=None, next_mask=None,
                extras={"state": np.full((1, STATE), 10 * ep + t, np.float32)},
                step=np.zeros(1, np.int64), first=np.array([t == 0])))
    return out


def _filled_buffer() -> ReplayBuffer:
    """Two interleaved streams of episodes of several lengths."""
    buffer = ReplayBuffer(200, 4, state_size=STATE)
    a = _stream_rows([5, 2, 9, 1, 4], env=0, slot=0)
    b = _stream_rows([3, 7, 6], env=1, slot=1)
    for i in range(max(len(a), len(b))):
        for rows in (a, b):
            if i < len(rows):
                buffer.add(rows[i], "p")
    return buffer


@pytest.mark.parametrize("burn_in,length", [(0, 3), (2, 3), (4, 2), (3, 12)])
def test_sequences_stay_in_one_episode_with_burn_in_before_the_learned_cells(burn_in, length):
    buffer = _filled_buffer()
    start = np.arange(len(buffer))
    w = windows(buffer, start, burn_in, length)
    obs = buffer.obs[w.pos]  # [L, B, 4]
    for b, row in enumerate(start):
        ep, t, env, slot = buffer.obs[row]
        cells = obs[w.valid[:, b], b]
        # one stream, one episode, consecutive steps
        assert (cells[:, 0] == ep).all() and (cells[:, 2] == env).all() and (cells[:, 3] == slot).all()
        assert np.array_equal(cells[:, 1], cells[0, 1] + np.arange(len(cells)))
        back = min(burn_in, int(t))
        assert cells[0, 1] == t - back  # the burn-in reaches back to the episode's start at most
        learned = obs[w.learn[:, b], b]
        assert learned[0, 1] == t and len(learned) <= length
        assert not w.learn[:back, b].any()  # burn-in cells carry no loss
        # padding only at the end
        n = int(w.valid[:, b].sum())
        assert w.valid[:n, b].all() and not w.valid[n:, b].any()
        # the sequence goes on to its episode's end or to its length, whichever comes first
        ep_len = int(buffer.obs[(buffer.obs[:, 0] == ep) & (buffer.obs[:, 2] == env), 1].max()) + 1
        assert len(learned) == min(length, ep_len - int(t))
        # unrolling starts from the state stored with the sequence's first row
        assert buffer.hidden[w.pos[0, b]][0] == 10 * ep + t - back


def test_a_sequence_stops_where_its_stream_was_overwritten():
    buffer = ReplayBuffer(6, 4, state_size=STATE)
    for row in _stream_rows([10], 0, 0):
        buffer.add(row, "p")
    w = windows(buffer, np.arange(6), 8, 4)
    steps = buffer.obs[w.pos, 1]
    for b in range(6):  # rows 4..9 are left; nothing reaches back past row 4
        assert steps[w.valid[:, b], b].min() >= 4


def _dqn(**settings) -> DQN:
    cfg = tiny_cfg("env.id=interplay.envs.recall", "algo.name=dqn")
    env, _ = make_vec_env(cfg)
    specs = make_specs(cfg, env)
    env.close()
    s = DQNSettings(model=ModelSettings(hidden=[8], recurrent="gru", recurrent_size=4,
                                        seq_len=3), **settings)
    return DQN(s, specs, "cpu", 0)


def test_burn_in_cells_carry_no_loss():
    algo = _dqn(burn_in=3, n_step=1)
    p = algo.policies["agent"]
    buffer = ReplayBuffer(100, 5, mask_dim=0, state_size=p.online.state_size)
    rng = np.random.default_rng(0)
    for t in range(6):
        buffer.add(Transitions(
            obs=rng.random((2, 5), np.float32), action=rng.integers(0, 4, 2),
            reward=rng.random(2), next_obs=rng.random((2, 5), np.float32),
            terminated=np.full(2, t == 5), truncated=np.zeros(2, bool), env=np.zeros(2, int),
            slot=np.arange(2), mask=None, next_mask=None,
            extras={"state": rng.random((2, p.online.state_size), np.float32)},
            step=np.zeros(2, int), first=np.full(2, t == 0)), "agent")
    w = windows(buffer, np.array([8, 9]), 3, 3)  # step 4 of each stream: burn-in 1..3
    assert w.learn.sum() < w.valid.sum()  # some cells are burn-in

    def loss() -> torch.Tensor:
        q, target, learn = algo._sequence_q(p, buffer, w)
        return ((q - target)[learn] ** 2).sum()

    before = loss().item()
    burn = w.pos[w.valid & ~w.learn]
    buffer.reward[burn] += 100.0  # what the burn-in did and was paid is not learned from
    buffer.action[burn] = (buffer.action[burn] + 1) % 4
    assert loss().item() == pytest.approx(before, rel=1e-6)
    buffer.reward[w.pos[w.learn]] += 1.0
    assert loss().item() != pytest.approx(before, rel=1e-6)


def _run(tmp_path, name, *extra, steps=160):
    cfg = tiny_cfg("algo.name=dqn", "env.id=interplay.envs.toy:turn_recall", "env.num_envs=2",
                   "algo.model.core=gru", "algo.model.hidden=[8]", "algo.model.recurrent_size=4",
                   "algo.model.seq_len=3", "algo.burn_in=2", "algo.batch_size=4",
                   "algo.learning_starts=40", "algo.train_every=8", "algo.n_step=2",
                   "algo.target_every=5", "train.test_frequency=80", "train.test_episodes=2",
                   "log.every=40", f"train.steps={steps}", *extra)
    return train(cfg, tmp_path / name)


@pytest.mark.parametrize("env,kind", [("interplay.envs.toy:turn_recall", "gru"),
                                      ("interplay.envs.recall", "lstm")])
def test_the_stored_state_is_the_one_each_action_was_taken_from(tmp_path, env, kind):
    # no learning: the network that acted is the saved one
    _run(tmp_path, "run", f"env.id={env}", f"algo.model.recurrent={kind}",
         "algo.learning_starts=100000", steps=60)
    net = interplay.load_policy(tmp_path / "run").actor.policy.online  # the one that acted
    saved = next(iter(decode(newest_state(tmp_path / "run")["storage"]).values()))["arrays"]
    hidden, obs, serial, nxt, prev = (saved[k] for k in ("hidden", "obs", "serial", "next", "prev"))
    starts = prev < 0
    assert starts.any() and (hidden[starts] == 0).all()  # each episode starts from zeros
    linked = np.flatnonzero(nxt >= 0)
    assert len(linked) > 10
    with torch.no_grad():
        _, after = net.step(torch.as_tensor(obs[linked]), torch.as_tensor(hidden[linked]))
    follow = np.searchsorted(serial, nxt[linked])
    np.testing.assert_allclose(hidden[follow], after.numpy(), atol=1e-6)


def test_a_turn_based_recurrent_run_resumes_exactly(tmp_path):
    _run(tmp_path, "straight")
    _run(tmp_path, "split", steps=80)
    interplay.resume(tmp_path / "split", ["train.steps=160"])
    assert untimed_metrics(tmp_path / "split") == untimed_metrics(tmp_path / "straight")
    a, b = newest_state(tmp_path / "straight"), newest_state(tmp_path / "split")
    for part in ("algo", "storage", "runner"):
        assert_same_state(a[part], b[part], part)
    assert any("loss/player" in r for r in read_metrics(tmp_path / "split") if r["env_steps"] > 80)


def test_load_policy_carries_the_recurrent_state_between_calls(tmp_path):
    _run(tmp_path, "run", "env.id=interplay.envs.recall", "algo.prioritized=true", steps=80)
    policy = interplay.load_policy(tmp_path / "run")
    net = policy.actor.policy.online
    cue = np.eye(5, dtype=np.float32)[[0, 1]]
    blank = np.zeros((2, 5), np.float32)
    state = policy.initial_state()
    for obs in (cue, blank, blank):
        policy.act(list(obs), state=state)
    with torch.no_grad():
        h = net.initial_state(2)
        for obs in (cue, blank, blank):
            _, h = net.step(torch.as_tensor(obs), h)
    np.testing.assert_allclose(state["recurrent_state"]["state"][:2, 0], h.numpy(), atol=1e-6)
    fresh = policy.initial_state()
    policy.act(list(blank), state=fresh)  # a fresh state starts an episode: from zeros
    with torch.no_grad():
        _, h0 = net.step(torch.as_tensor(blank), net.initial_state(2))
    np.testing.assert_allclose(fresh["recurrent_state"]["state"][:2, 0], h0.numpy(), atol=1e-6)


@pytest.mark.parametrize("algo,env,agents", [
    ("vdn", "interplay.envs.recall", 2), ("qmix", "interplay.envs.recall", 2),
    # agents that come and go: an absent agent's state waits for its return
    ("vdn", "interplay.envs.toy:shifting_crowd", 4)])
def test_vdn_and_qmix_learn_recurrent_networks(tmp_path, algo, env, agents):
    mixer = ["algo.mixer_hidden=4", "algo.hypernet_hidden=4"] if algo == "qmix" else []
    result = _run(tmp_path, algo, f"env.id={env}", f"algo.name={algo}",
                  "algo.prioritized=true", *mixer, steps=120)
    rows = read_metrics(result.run_dir)
    assert any("loss" in r and np.isfinite(r["loss"]) for r in rows)
    (group,) = decode(newest_state(result.run_dir)["storage"])["columns"].values()
    assert group["hidden"].shape[1:] == (agents, 4)


@pytest.mark.parametrize("overrides,key", [
    (["algo.name=isac", "algo.model.recurrent=gru"], "algo.model.recurrent: isac"),
    (["algo.name=maddpg", "algo.model.core=lstm"], "algo.model.recurrent: maddpg"),
    (["algo.name=masac", "policies.agent.model.core=gru"], "policies.agent.model.recurrent: masac"),
])
def test_algorithms_without_recurrent_networks_refuse_them_by_name(overrides, key):
    with pytest.raises(ConfigError, match=key) as err:
        tiny_cfg("env.id=interplay.envs.recall", *overrides)
    assert "dqn" in str(err.value) and "ippo" in str(err.value)


def test_recurrent_vdn_refuses_a_network_per_agent(tmp_path):
    with pytest.raises(ConfigError, match="algo.share_params"):
        _run(tmp_path, "x", "env.id=interplay.envs.recall", "algo.name=vdn",
             "algo.share_params=false")


def test_core_is_another_name_for_recurrent():
    cfg = tiny_cfg("algo.name=dqn", "algo.model.core=lstm")
    assert cfg.algo.model.recurrent == "lstm"
    assert "core" not in cfg.algo.model.model_dump()


QUICK_RECALL = ["env.kwargs.delay=2", "env.num_envs=8",
                "algo.name=dqn", "algo.model.hidden=[32]", "algo.model.recurrent_size=32",
                "algo.model.seq_len=4", "algo.burn_in=4", "algo.lr=0.003", "algo.batch_size=16",
                "algo.buffer_size=5000", "algo.learning_starts=300", "algo.train_every=8",
                "algo.target_every=50", "algo.exploration_steps=2000", "algo.epsilon_end=0.02",
                "train.steps=2000", "train.test_frequency=100000", "train.test_episodes=100",
                "log.every=1000"]
"""Recall with a short delay, learned in a few seconds: the cue seen two steps (or two of the
agent's own turns) before."""


@pytest.mark.slow
@pytest.mark.parametrize("env", ["interplay.envs.recall", "interplay.envs.toy:turn_recall"])
def test_recurrent_dqn_recalls_the_cue_where_plain_dqn_stays_at_chance(tmp_path, env):
    def score(recurrent: str) -> float:
        result = train(tiny_cfg(*QUICK_RECALL, f"env.id={env}",
                                f"algo.model.recurrent={recurrent}"), tmp_path / recurrent)
        tests = [r for r in read_metrics(result.run_dir) if r["phase"] == "test"]
        return tests[-1]["episode_return_mean"] / 2  # per agent: the share of cues recalled

    gru, plain = score("gru"), score("none")
    assert gru >= 0.9  # seen: 1.0 on this seed
    assert plain < 0.4  # chance: 0.25


def test_an_exported_recurrent_q_network_acts_as_load_policy(tmp_path):
    from interplay.experiment.export import export_policy

    _run(tmp_path, "run", "env.id=interplay.envs.recall", "algo.model.recurrent=lstm", steps=80)
    module = torch.jit.load(str(export_policy(tmp_path / "run", tmp_path / "q.pt", "torchscript")))
    policy = interplay.load_policy(tmp_path / "run")
    obs = np.random.default_rng(0).random((50, 5)).astype(np.float32)
    state, carried = policy.initial_state(), torch.zeros(50, 8)
    for _ in range(3):  # the state carried between steps, on both sides
        want = np.asarray(policy.act(list(obs), state=state))
        action, carried = module(torch.from_numpy(obs), torch.ones(50, 4, dtype=torch.bool),
                                 carried)
        np.testing.assert_array_equal(action.numpy(), want)


def test_the_turn_based_recall_passes_the_env_checks_and_pays_only_the_guess(capsys):
    from interplay.cli import main
    from interplay.envs.toy import TurnRecall

    assert main(["check", "interplay.envs.toy:turn_recall", "--cycles", "40"]) == 0
    assert "passed the PettingZoo API test" in capsys.readouterr().out
    env = TurnRecall(n_agents=2, n_cues=3, delay=1)
    env.reset(seed=1)
    seen, paid = {}, {a: 0.0 for a in env.possible_agents}
    for agent in env.agent_iter():
        obs, reward, term, trunc, _ = env.last()
        paid[agent] += reward
        if obs[:3].any():
            seen[agent] = int(obs[:3].argmax())  # the cue, at the agent's first turn only
        env.step(None if term or trunc else (seen[agent] if obs[-1] else 0))
    assert seen.keys() == set(env.possible_agents) and paid == {a: 1.0 for a in seen}

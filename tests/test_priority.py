"""Prioritised replay: draws follow priorities, weights undo the bias, state survives resume."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import read_metrics

from interplay.config.loading import load
from interplay.data.priority import Priorities, SumTree
from interplay.data.replay import Group, JointReplayBuffer, ReplayBuffer
from interplay.errors import ConfigError
from interplay.experiment.loop import resume, train
from interplay.experiment.run_store.checkpoint import latest_valid, load_checkpoint
from interplay.experiment.run_store.statecodec import decode, encode
from interplay.run.transitions import Transitions

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


def _rows(n: int, start: int = 0) -> Transitions:
    def col(x, dtype):
        return np.asarray(x, dtype)

    obs = np.arange(start, start + n, dtype=np.float32).reshape(-1, 1)
    return Transitions(
        obs=obs, action=np.zeros(n, np.int64), reward=np.zeros(n), next_obs=obs + 1,
        terminated=np.zeros(n, bool), truncated=np.zeros(n, bool), env=np.arange(n),
        slot=np.zeros(n, np.int64), mask=None, next_mask=None, extras={},
        step=col(np.zeros(n), np.int64), first=None)


def test_the_sum_tree_finds_each_leaf_in_its_span_and_keeps_sums():
    tree = SumTree(5)
    tree.set(np.arange(5), np.array([1.0, 0.0, 3.0, 0.5, 0.5]))
    assert tree.total == pytest.approx(5.0)
    got = tree.find(np.array([0.0, 0.99, 1.0, 3.99, 4.0, 4.49, 4.5, 4.99]))
    assert got.tolist() == [0, 0, 2, 2, 3, 3, 4, 4]
    tree.set(np.array([2, 2]), np.array([9.0, 1.0]))  # the last of repeated indices wins
    assert tree.total == pytest.approx(3.0)
    tree.rebuild(np.array([2.0, 2.0]))
    assert tree.total == pytest.approx(4.0) and tree.find(np.array([2.5])).tolist() == [1]


def test_draw_frequencies_follow_the_priorities():
    buf = ReplayBuffer(8, 1)
    buf.prioritize(alpha=1.0, eps=0.0)
    buf.add(_rows(4))
    buf.update_priorities(np.arange(4), np.array([1.0, 2.0, 3.0, 4.0]))
    rng = np.random.default_rng(0)
    counts = np.zeros(4)
    for _ in range(200):
        s = buf.sample(100, rng)
        counts += np.bincount(s.index, minlength=4)
    freq = counts / counts.sum()
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.3, 0.4], atol=0.01)
    # alpha flattens them: alpha 0 is uniform
    flat = Priorities(4, alpha=0.0, eps=0.0)
    flat.added(np.arange(4))
    flat.update(np.arange(4), np.array([1.0, 2.0, 3.0, 4.0]))
    idx, _ = flat.draw(4, 40_000, rng, 1.0)
    np.testing.assert_allclose(np.bincount(idx, minlength=4) / 40_000, 0.25, atol=0.01)


def test_importance_weights_undo_the_uneven_draw():
    pr = Priorities(4, alpha=1.0, eps=0.0)
    pr.added(np.arange(4))
    pr.update(np.arange(4), np.array([1.0, 1.0, 1.0, 5.0]))
    idx, w = pr.draw(4, 1000, np.random.default_rng(1), beta=1.0)
    assert w.max() == pytest.approx(1.0)
    # with beta 1, weight * probability is the same for every row: the weighted draw is uniform
    assert np.allclose(w[idx == 3] * 5 / 8, w[idx == 0][0] * 1 / 8)
    _, w0 = pr.draw(4, 1000, np.random.default_rng(1), beta=0.0)
    assert np.all(w0 == 1.0)


def test_new_rows_get_the_largest_priority_and_clear_forgets():
    buf = ReplayBuffer(4, 1)
    buf.prioritize(alpha=1.0, eps=0.0)
    buf.add(_rows(2))
    buf.update_priorities(np.array([0, 1]), np.array([0.5, 7.0]))
    buf.add(_rows(1, start=2))
    assert buf.priorities is not None
    assert buf.priorities.tree.values(np.array([2]))[0] == pytest.approx(7.0)
    buf.clear()
    assert buf.priorities.tree.total == 0.0 and buf.priorities.max_priority == 1.0


def test_a_non_finite_td_error_is_refused():
    pr = Priorities(2, alpha=0.6, eps=1e-6)
    with pytest.raises(ValueError, match="non-finite"):
        pr.update(np.array([0]), np.array([np.nan]))


def test_priorities_survive_the_checkpoint_codec_in_both_buffers():
    buf = ReplayBuffer(16, 1)
    buf.prioritize(alpha=0.6)
    buf.add(_rows(6))
    buf.update_priorities(np.arange(6), np.linspace(0.1, 3.0, 6))
    other = ReplayBuffer(16, 1)
    other.prioritize(alpha=0.6)
    other.load_state_dict(decode(encode(buf.state_dict())))
    a = buf.sample(64, np.random.default_rng(5))
    b = other.sample(64, np.random.default_rng(5))
    assert np.array_equal(a.index, b.index) and np.allclose(a.weight, b.weight)

    joint = JointReplayBuffer(8, {"g": Group(2, 1)})
    joint.prioritize(alpha=1.0)
    _, rows = joint.join({"g": _rows(2)})
    joint.add(rows)
    joint.update_priorities(np.array([0]), np.array([4.0]))
    again = JointReplayBuffer(8, {"g": Group(2, 1)})
    again.prioritize(alpha=1.0)
    again.load_state_dict(decode(encode(joint.state_dict())))
    assert again.priorities is not None and again.priorities.max_priority == pytest.approx(4.0)
    i1, _, w1 = joint.sample(32, np.random.default_rng(2))
    i2, _, w2 = again.sample(32, np.random.default_rng(2))
    assert np.array_equal(i1, i2) and np.allclose(w1, w2)


@pytest.mark.parametrize("extra", [
    ["algo.name=dqn", "env.id=pettingzoo.classic.tictactoe_v3", "train.self_play=true",
     "algo.learning_starts=30", "algo.train_every=3", "algo.batch_size=16", "algo.n_step=3",
     "algo.target_every=10", "algo.exploration_steps=150"],
    ["algo.name=qmix", "env.id=spread", "algo.learning_starts=60", "algo.batch_size=16",
     "algo.train_every=4"],
], ids=["dqn", "qmix"])
def test_a_prioritised_run_resumes_exactly_with_its_priorities(tmp_path, extra):
    common = [*extra, "algo.prioritized=true", "algo.priority_beta_steps=200", "env.num_envs=3",
              "log.every=60", *QUIET]
    train(load([], [*common, "train.steps=240"]), tmp_path / "straight")
    train(load([], [*common, "train.steps=120"]), tmp_path / "split")
    state, _ = load_checkpoint(latest_valid(tmp_path / "split"))
    assert "priorities" in repr(state["storage"])[:100_000]
    resume(tmp_path / "split", ["train.steps=240"])
    skip = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}
    a = [{k: v for k, v in r.items() if k not in skip} for r in read_metrics(tmp_path / "straight")]
    b = [{k: v for k, v in r.items() if k not in skip} for r in read_metrics(tmp_path / "split")]
    assert a == b and any(k.startswith("loss") for k in a[-1])


def test_priority_settings_are_checked():
    with pytest.raises(ConfigError, match="priority_alpha"):
        load([], ["algo.name=dqn", "algo.priority_alpha=1.5"])
    with pytest.raises(ConfigError, match="prioritized"):
        load([], ["algo.name=ippo", "algo.prioritized=true"])

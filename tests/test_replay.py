"""The replay buffer: storage, overwriting, n-step returns per agent stream, state."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make_runner

from interplay.data.replay import Group, JointReplayBuffer, ReplayBuffer
from interplay.envs.toy import Move
from interplay.experiment.run_store.statecodec import decode, encode
from interplay.run.transitions import Transitions


def rows(obs, next_obs, reward, env=0, slot=0, terminated=False, truncated=False, action=0,
         mask=None, next_mask=None, step=0, first=None) -> Transitions:
    """A batch of transitions from columns (scalars repeat)."""
    obs = np.asarray(obs, np.float32).reshape(-1, 1)
    n = len(obs)

    def col(x, dtype):
        return np.broadcast_to(np.asarray(x, dtype), (n,)).copy()

    return Transitions(
        obs=obs, action=col(action, np.int64), reward=col(reward, np.float64),
        next_obs=np.asarray(next_obs, np.float32).reshape(-1, 1),
        terminated=col(terminated, bool), truncated=col(truncated, bool), env=col(env, np.int64),
        slot=col(slot, np.int64), mask=mask, next_mask=next_mask, extras={},
        step=col(step, np.int64), first=None if first is None else col(first, bool),
    )


def episode(buf: ReplayBuffer, rewards, start=0.0, end="terminated", env=0, slot=0):
    """One stream's episode, one transition per add, observations start, start+1, ..."""
    for i, r in enumerate(rewards):
        last = i == len(rewards) - 1
        buf.add(rows([start + i], [start + i + 1], [r], env=env, slot=slot,
                     terminated=last and end == "terminated", truncated=last and end == "truncated"))


def test_rows_are_stored_and_the_oldest_overwritten():
    buf = ReplayBuffer(4, 1)
    buf.add(rows([0, 1, 2], [1, 2, 3], [0.0, 1.0, 2.0], env=[0, 1, 2]))
    assert len(buf) == 3
    buf.add(rows([3, 4], [4, 5], [3.0, 4.0], env=[0, 1]))
    assert len(buf) == 4 and buf.added == 5
    assert sorted(buf.reward) == [1.0, 2.0, 3.0, 4.0]
    s = buf.sample(100, np.random.default_rng(0))
    assert set(s.reward) == {1.0, 2.0, 3.0, 4.0}
    assert (s.next_obs[:, 0] == s.obs[:, 0] + 1).all()


def test_a_batch_larger_than_the_buffer_keeps_its_newest_rows():
    buf = ReplayBuffer(4, 1)
    buf.add(rows(list(range(10)), list(range(1, 11)), [float(i) for i in range(10)],
                 env=list(range(10))))  # ten streams in one step, four rows of room
    assert len(buf) == 4 and buf.added == 10
    assert sorted(buf.reward) == [6.0, 7.0, 8.0, 9.0]
    whole = ReplayBuffer(3, 1)  # one stream's whole episode, longer than the buffer
    episode_rows = rows([0, 1, 2, 3, 4], [1, 2, 3, 4, 5], [0.0, 1.0, 2.0, 3.0, 4.0],
                        terminated=[False] * 4 + [True])
    whole.add(episode_rows)
    assert sorted(whole.reward) == [2.0, 3.0, 4.0]
    s = whole.gather(np.array([np.argmin(whole.reward)]), n_step=3, gamma=1.0)
    assert s.reward[0] == 2.0 + 3.0 + 4.0 and s.terminated[0]  # still linked in order
    joint = joint_buffer(capacity=2)
    a = rows([0, 1, 2], [0, 0, 0], [0.0, 1.0, 2.0], env=[0, 1, 2], slot=[0, 0, 0])
    joint.add(joint.join({"a": a})[1])
    assert joint.added == 3 and sorted(joint.columns["a"]["reward"][:, 0]) == [1.0, 2.0]


def test_sampling_is_uniform_and_follows_the_generator():
    buf = ReplayBuffer(10, 1)
    buf.add(rows(np.arange(10), np.arange(10) + 1, np.arange(10.0), env=np.arange(10)))
    a = buf.sample(20_000, np.random.default_rng(3))
    b = buf.sample(20_000, np.random.default_rng(3))
    assert (a.index == b.index).all()
    counts = np.bincount(a.index, minlength=10)
    assert counts.min() > 1800 and counts.max() < 2200


@pytest.mark.parametrize("end", ["terminated", "truncated"])
def test_n_step_returns_by_hand(end):
    buf = ReplayBuffer(16, 1)
    episode(buf, [1.0, 2.0, 3.0, 4.0], end=end)
    g = 0.5
    s = buf.gather(np.arange(4), n_step=3, gamma=g)
    assert s.reward.tolist() == [1 + g * 2 + g * g * 3, 2 + g * 3 + g * g * 4, 3 + g * 4, 4]
    assert s.steps.tolist() == [3, 3, 2, 1]
    assert s.discount.tolist() == [g**3, g**3, g**2, g]
    assert s.next_obs[:, 0].tolist() == [3, 4, 4, 4]
    ended = [False, True, True, True]
    assert s.terminated.tolist() == (ended if end == "terminated" else [False] * 4)
    assert s.truncated.tolist() == (ended if end == "truncated" else [False] * 4)
    one = buf.gather(np.arange(4), n_step=1, gamma=g)
    assert one.reward.tolist() == [1, 2, 3, 4] and one.steps.tolist() == [1] * 4


def test_returns_stop_at_the_episode_end_of_their_own_stream():
    buf = ReplayBuffer(32, 1)
    # Two seats of one copy and one seat of another, interleaved as in a turn-based game.
    for i in range(3):
        buf.add(rows([10 * i], [10 * (i + 1)], [1.0], env=0, slot=0, terminated=i == 2))
        buf.add(rows([100 + 10 * i], [100 + 10 * (i + 1)], [-1.0], env=0, slot=1))
        buf.add(rows([500 + i], [500 + i + 1], [2.0], env=1, slot=0))
    episode(buf, [5.0, 6.0], start=30.0)  # seat 0's next episode continues observation 30
    s = buf.gather(np.arange(len(buf)), n_step=4, gamma=1.0)
    by_obs = dict(zip(s.obs[:, 0].tolist(), zip(s.reward, s.steps, strict=True), strict=True))
    assert by_obs[0.0] == (3.0, 3) and by_obs[20.0] == (1.0, 1)  # stops at the termination
    assert by_obs[30.0] == (11.0, 2)
    assert by_obs[100.0] == (-3.0, 3)  # not ended: stops where its rows run out
    assert by_obs[500.0] == (6.0, 3)


def test_a_row_that_does_not_continue_the_stream_is_not_linked():
    buf = ReplayBuffer(8, 1)
    buf.add(rows([0], [1], [1.0]))
    # The env was restarted in between (the episode was dropped): the runner marks the new
    # episode's first row, and nothing links to it, whatever its observation.
    buf.add(rows([1], [8], [1.0], first=True))
    assert buf.gather(np.array([0]), n_step=3).steps.tolist() == [1]


def test_returns_stop_where_the_next_row_was_overwritten():
    buf = ReplayBuffer(3, 1)
    episode(buf, [1.0, 1.0, 1.0, 1.0, 1.0], end="none")
    # Rows 2, 3, 4 are left; row 4's successor never came and row 1 is gone.
    s = buf.gather(np.arange(3), n_step=5, gamma=1.0)
    assert sorted(zip(s.obs[:, 0].tolist(), s.steps.tolist(), strict=True)) == [(2, 3), (3, 2), (4, 1)]
    buf.add(rows([5], [6], [1.0]))  # overwrites row 2: the chain from 3 still reaches it
    s = buf.gather(np.arange(3), n_step=5, gamma=1.0)
    assert sorted(zip(s.obs[:, 0].tolist(), s.steps.tolist(), strict=True)) == [(3, 3), (4, 2), (5, 1)]


def test_one_stream_twice_in_one_batch_is_added_in_order():
    buf = ReplayBuffer(8, 1)
    buf.add(rows([0, 1], [1, 2], [1.0, 2.0], env=0, slot=0))
    s = buf.gather(np.array([0]), n_step=2, gamma=1.0)
    assert s.reward.tolist() == [3.0]


def test_masks_are_kept_and_the_last_step_gives_next_mask():
    buf = ReplayBuffer(8, 1, mask_dim=3)
    m0, m1, m2 = np.array([[1, 0, 1]], bool), np.array([[0, 1, 1]], bool), np.array([[1, 1, 0]], bool)
    buf.add(rows([0], [1], [0.0], mask=m0, next_mask=m1))
    buf.add(rows([1], [2], [0.0], mask=m1, next_mask=m2))
    s = buf.gather(np.array([0]), n_step=2)
    assert (s.mask == m0).all() and (s.next_mask == m2).all()


def test_state_round_trip_through_the_checkpoint_codec():
    buf = ReplayBuffer(5, 1, mask_dim=2)
    for e in range(3):
        episode(buf, [1.0, 2.0], start=10.0 * e, env=e, end="none")
    other = ReplayBuffer(5, 1, mask_dim=2)
    other.load_state_dict(decode(encode(buf.state_dict())))
    a = buf.sample(50, np.random.default_rng(1), n_step=3, gamma=0.9)
    b = other.sample(50, np.random.default_rng(1), n_step=3, gamma=0.9)
    assert all((getattr(a, k) == getattr(b, k)).all() for k in vars(a) if getattr(a, k) is not None)
    # The streams carry on after loading: the next row still links to the last one.
    for x in (buf, other):
        x.add(rows([12], [13], [4.0], env=0))
    assert (buf.gather(np.arange(5), 3, 0.9).reward == other.gather(np.arange(5), 3, 0.9).reward).all()
    small = ReplayBuffer(5, 1, mask_dim=2)
    small.add(rows([0], [1], [0.0]))
    assert small.state_dict()["arrays"]["obs"].shape == (1, 1)  # only filled rows are saved
    with pytest.raises(ValueError, match="buffer size"):
        ReplayBuffer(6, 1, mask_dim=2).load_state_dict(buf.state_dict())


def test_n_step_returns_of_a_turn_based_game_match_the_env_rewards():
    """Runner-booked transitions of a 3-player game with rewards to everyone, gathered back."""
    plan = [Move(rewards={"player_0": 1.0, "player_2": 0.5}), Move(rewards={"player_1": 2.0}),
            Move(rewards={"player_0": -1.0}, skip=1), Move(rewards={"player_1": 3.0, "player_2": 1.0}),
            Move(rewards={"player_2": -2.0}), Move(), Move(rewards={"player_0": 4.0})]
    runner = make_runner({
        "env": {"id": "interplay.envs.toy:scripted_turn_game", "num_envs": 2,
                "kwargs": {"n_agents": 3, "plan": plan}},
        "train": {"self_play": True},
    })
    runner.reset(0)
    buf = ReplayBuffer(1000, runner.specs["shared"].obs_dim, mask_dim=3)
    streams: dict[tuple[int, int], list[tuple[float, bool]]] = {}
    for _ in range(40):
        for t in runner.step().values():
            buf.add(t, "shared")
            for e, s, r, d in zip(t.env, t.slot, t.reward, t.terminated, strict=True):
                streams.setdefault((int(e), int(s)), []).append((float(r), bool(d)))
    g, n = 0.9, 3
    expected = []
    for seq in streams.values():
        for i in range(len(seq)):
            ret, k = 0.0, 0
            while k < n and i + k < len(seq):
                ret += g**k * seq[i + k][0]
                k += 1
                if seq[i + k - 1][1]:
                    break
            expected.append((k, round(ret, 9)))
    s = buf.gather(np.arange(len(buf)), n_step=n, gamma=g)
    got = sorted(zip(s.steps.tolist(), np.round(s.reward, 9).tolist(), strict=True))
    assert len(got) == buf.added > 20
    assert got == sorted(expected)


# -- joint rows ---------------------------------------------------------------------------------
def joint_buffer(capacity: int = 8) -> JointReplayBuffer:
    return JointReplayBuffer(capacity, {"a": Group(agents=2, obs_dim=1),
                                        "b": Group(agents=1, obs_dim=1, mask_dim=3)})


def test_joint_rows_join_groups_by_copy_and_mark_absent_agents():
    buf = joint_buffer()
    # copies out of order; agent (copy 2, slot 1) of group a closed nothing this step
    a = rows([20, 10, 11, 21], [0, 0, 0, 0], [2.0, 1.0, 1.5, 2.5], env=[2, 1, 1, 0],
             slot=[0, 0, 1, 1], action=[5, 6, 7, 8])
    b = rows([100, 102], [0, 0], [-1.0, -3.0], env=[0, 2], terminated=[False, True],
             mask=np.array([[1, 0, 1], [0, 1, 1]], bool))
    copies, joined = buf.join({"a": a, "b": b})
    assert copies.tolist() == [0, 1, 2]
    buf.add(joined)
    got = buf.gather(np.arange(3))
    assert got["a"].obs[..., 0].tolist() == [[0, 21], [10, 11], [20, 0]]
    assert got["a"].action.tolist() == [[0, 8], [6, 7], [5, 0]]
    assert got["a"].present.tolist() == [[False, True], [True, True], [True, False]]
    assert got["b"].reward[:, 0].tolist() == [-1.0, 0.0, -3.0]
    assert got["b"].terminated[:, 0].tolist() == [False, False, True]
    assert got["b"].mask[:, 0].tolist() == [[1, 0, 1], [1, 1, 1], [0, 1, 1]]
    assert got["a"].mask is None


def test_joint_rows_of_whole_episodes_join_by_step_and_copy_in_time_order():
    buf = joint_buffer()
    # two steps of two copies handed over at once, as at the end of their episodes
    a = rows([0, 1, 10, 11], [1, 2, 11, 12], [1.0, 2.0, 3.0, 4.0], env=[0, 0, 1, 1],
             step=[5, 6, 5, 6])
    b = rows([50, 60, 51, 61], [0, 0, 0, 0], [0.0] * 4, env=[0, 1, 0, 1], step=[5, 5, 6, 6])
    copies, joined = buf.join({"a": a, "b": b})
    assert copies.tolist() == [0, 1, 0, 1]
    buf.add(joined)
    got = buf.gather(np.arange(4))
    assert got["a"].obs[:, 0, 0].tolist() == [0, 10, 1, 11]
    assert got["b"].obs[:, 0, 0].tolist() == [50, 60, 51, 61]


def test_joint_rows_overwrite_the_oldest_sample_uniformly_and_survive_the_codec():
    buf = joint_buffer(capacity=4)
    for step in range(3):
        a = rows([step, step], [0, 0], [float(step)] * 2, env=[0, 1], slot=[0, 0])
        buf.add(buf.join({"a": a})[1])
    assert len(buf) == 4 and buf.added == 6
    assert sorted(buf.columns["a"]["reward"][:, 0]) == [1.0, 1.0, 2.0, 2.0]
    index, got, weight = buf.sample(4000, np.random.default_rng(0))
    assert weight is None  # uniform
    assert np.bincount(index, minlength=4).min() > 900
    np.testing.assert_array_equal(got["a"].obs[:, 0, 0], got["a"].reward[:, 0])
    other = joint_buffer(capacity=4)
    other.load_state_dict(decode(encode(buf.state_dict())))
    assert other.added == 6
    for name, cols in buf.columns.items():
        for key, col in cols.items():
            np.testing.assert_array_equal(other.columns[name][key], col)


def test_joint_rows_refuse_an_agent_twice_in_a_step_and_unknown_groups():
    buf = joint_buffer()
    twice = rows([1, 2], [0, 0], [0.0, 0.0], env=[0, 0], slot=[1, 1])
    with pytest.raises(ValueError, match="two transitions in one copy and step"):
        buf.join({"a": twice})
    with pytest.raises(ValueError, match="no group 'c'"):
        buf.join({"c": twice})


def test_a_saved_buffer_of_another_size_is_refused_naming_both_sizes():
    saved = ReplayBuffer(8, 1).state_dict()
    with pytest.raises(ValueError, match="holds 8 rows, this one 16; keep the buffer size"):
        ReplayBuffer(16, 1).load_state_dict(saved)
    with pytest.raises(ValueError, match="holds 8 rows, this one 4; keep the buffer size"):
        joint_buffer(capacity=4).load_state_dict(joint_buffer(capacity=8).state_dict())


def test_joint_rows_link_within_a_copys_episode_for_n_step_folds():
    buf = JointReplayBuffer(16, {"a": Group(1, 1)})

    def step(t, envs, done=(), first=()):
        n = len(envs)
        a = rows([t] * n, [t + 1] * n, [1.0] * n, env=envs, step=t,
                 truncated=[e in done for e in envs], first=[e in first for e in envs])
        copies, joined = buf.join({"a": a})
        buf.add(joined, copies, buf._starts)

    step(0, [0, 1], first=(0, 1))
    step(1, [0, 1], done=(0,))  # copy 0's episode ends here
    step(2, [0, 1], first=(0,))
    step(3, [1], first=(1,))  # copy 1's episode was dropped: a new one starts
    # rows: 0 (c0 t0), 1 (c1 t0), 2 (c0 t1 end), 3 (c1 t1), 4 (c0 t2), 5 (c1 t2), 6 (c1 t3)
    nxt, ok = buf.follow(np.arange(7))
    assert ok.tolist() == [True, True, False, True, False, False, False]
    assert nxt[ok].tolist() == [2, 3, 5]
    assert buf.episode_ended(np.array([2, 3])).tolist() == [True, False]
    saved = decode(encode(buf.state_dict()))
    again = JointReplayBuffer(16, {"a": Group(1, 1)})
    again.load_state_dict(saved)
    assert np.array_equal(again.follow(np.arange(7))[0], nxt)

"""complete_episodes on an env whose episodes never end: held transitions stay bounded."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import make_runner

from interplay.run import transitions
from interplay.run.transitions import EpisodeHold, Transitions


def batch(envs: list[int], first: float = 0.0) -> Transitions:
    n = len(envs)
    return Transitions(
        obs=np.zeros((n, 2), np.float32), action=np.zeros(n, np.int64),
        reward=first + np.arange(n, dtype=np.float64), next_obs=np.zeros((n, 2), np.float32),
        terminated=np.zeros(n, bool), truncated=np.zeros(n, bool), env=np.array(envs),
        slot=np.zeros(n, np.int64), mask=None, next_mask=None, extras={}, step=np.zeros(n, np.int64),
    )


def test_a_copy_past_the_limit_is_handed_out_unfinished_and_warned_about_once():
    hold = EpisodeHold(limit=5)
    assert not hold.add(batch([0, 1, 2]))
    assert not hold.add(batch([0, 1, 0]))
    with pytest.warns(RuntimeWarning, match=r"train.max_steps_per_episode.*truncate_episodes"):
        for i in range(3):
            full = hold.add(batch([0, 1], first=10.0 * i))
    assert full and len(hold) == 12
    out = hold.release(np.zeros(3, bool))  # no episode ended: only copy 0 (6 rows) comes out
    assert out is not None and set(out.env.tolist()) == {0} and len(out) == 6
    assert len(hold) == 6 and sorted(set(np.concatenate([t.env for t in hold.parts]))) == [1, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second cut says nothing more
        assert hold.add(batch([1, 1]))
    assert set(hold.release(np.zeros(3, bool)).env.tolist()) == {1}
    assert len(hold) == 1


def test_many_copies_of_long_but_finite_episodes_are_not_cut():
    hold = EpisodeHold(limit=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(10):  # 8 copies x 10 rows: 80 held, none past 10
            assert not hold.add(batch(list(range(8))))
    assert len(hold) == 80


def test_a_never_ending_env_holds_a_bounded_number_of_rows_and_loses_none(monkeypatch):
    monkeypatch.setattr(transitions, "HOLD_LIMIT", 60)
    forever = {"a_0": [0, 10**9], "a_1": [0, 10**9]}
    runner = make_runner({"env": {"id": "interplay.envs.toy:shifting_crowd", "num_envs": 2,
                                  "kwargs": {"schedule": forever, "max_steps": 10**9}}})
    runner.reset(0)
    handed_out, most_held = 0, 0
    with pytest.warns(RuntimeWarning, match="handed to the learner unfinished") as caught:
        for _ in range(400):
            handed_out += sum(len(t) for t in runner.step().values())
            most_held = max(most_held, *(len(h) for h in runner.holds.values()))
    assert len([w for w in caught if w.category is RuntimeWarning]) == 1
    assert runner.episodes == 0 and most_held <= 2 * (60 + 2)
    held = sum(len(h) for h in runner.holds.values())
    closed = 400 * 2 * 2  # every step closes one transition per agent and copy
    assert handed_out + held == closed and handed_out > 0

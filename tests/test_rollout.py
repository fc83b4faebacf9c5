"""The rollout is ``[T, E, k]`` per policy: each agent's transitions one sequence, by index."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make_runner

from interplay.data.rollout import RolloutStorage
from interplay.run.transitions import Transitions


def fill(data: dict, steps: int, complete: bool = False) -> tuple[RolloutStorage, object]:
    runner = make_runner(data)
    if not complete:
        runner.holds = None
    storage = RolloutStorage({pid: len(s.agents) for pid, s in runner.specs.items()},
                             runner.env.num_envs)
    runner.reset(0)
    for _ in range(steps):
        for pid, batch in runner.step().items():
            storage.add(pid, batch)
        storage.end_step(runner.env_steps)
    return storage, runner


def test_a_parallel_env_fills_every_cell_in_step_order():
    storage, runner = fill({"env": {"id": "spread", "num_envs": 3}}, 30)
    r = storage.rollout("agent")
    assert r.shape == (30, 3, 3)
    assert r.valid.all()
    # T is the runner's step here: every agent closes one transition per step.
    assert (r.step == np.arange(1, 31)[:, None, None]).all()
    follows = r.follows()
    # Each cell's next observation is what the agent saw in the next cell, within an episode.
    np.testing.assert_array_equal(r.next_obs[:-1][follows[:-1]], r.obs[1:][follows[:-1]])
    ended = r.terminated | r.truncated
    assert not follows[ended].any() and ended[24].all()  # spread's episodes are 25 steps
    assert r.first[0].all() and r.first[25].all() and not r.first[1:25].any()


def test_a_turn_based_env_gives_each_seat_its_own_moves_as_one_sequence():
    storage, _ = fill({"env": {"id": "pettingzoo.classic.tictactoe_v3", "num_envs": 2},
                       "policies": {"p": {"agents": ["player_*"]}}}, 60, complete=True)
    r = storage.rollout("p")
    T, E, k = r.shape
    assert (E, k) == (2, 2)
    for e in range(E):
        for j in range(k):
            n = int(r.valid[:, e, j].sum())
            assert r.valid[:n, e, j].all() and not r.valid[n:, e, j].any()  # no gaps
            steps = r.step[:n, e, j]
            assert (np.diff(steps) > 0).all()  # in time order
            # Within an episode a seat's next observation is what it sees at its next turn.
            go_on = r.follows()[:n - 1, e, j]
            np.testing.assert_array_equal(r.next_obs[:n - 1, e, j][go_on],
                                          r.obs[1:n, e, j][go_on])
    # The two seats take turns: in one copy, their transitions never close in the same step
    # except when a game ends (both close then).
    ended = r.terminated | r.truncated
    assert ended.any()


def test_an_episode_start_cuts_the_sequence_even_without_an_end_flag():
    storage = RolloutStorage({"p": 1}, 1)

    def row(obs, first):
        return Transitions(
            obs=np.array([[obs]], np.float32), action=np.zeros(1, np.int64),
            reward=np.ones(1), next_obs=np.array([[obs + 1]], np.float32),
            terminated=np.zeros(1, bool), truncated=np.zeros(1, bool), env=np.zeros(1, int),
            slot=np.zeros(1, int), mask=None, next_mask=None, extras={}, step=np.zeros(1, int),
            first=np.array([first]))

    storage.add("p", row(0.0, True))
    storage.add("p", row(1.0, False))
    storage.add("p", row(7.0, True))  # the episode before was dropped: no end flag
    assert storage.rollout("p").follows()[:, 0, 0].tolist() == [True, False, False]


def test_the_runner_marks_each_agents_first_transition_of_an_episode():
    storage, _ = fill({"env": {"id": "pettingzoo.classic.connect_four_v3", "num_envs": 2},
                       "policies": {"p": {"agents": ["player_*"]}}}, 120, complete=True)
    r = storage.rollout("p")
    for e in range(2):
        for j in range(2):
            n = int(r.valid[:, e, j].sum())
            ended = (r.terminated | r.truncated)[:n, e, j]
            want = np.r_[True, ended[:-1]]  # the first, and each right after an end
            np.testing.assert_array_equal(r.first[:n, e, j], want)


@pytest.mark.parametrize("complete", [False, True])
def test_the_storage_state_round_trips_cell_for_cell(complete):
    storage, runner = fill({"env": {"id": "spread", "num_envs": 2}}, 40, complete)
    again = RolloutStorage({"agent": 3}, 2)
    again.load_state_dict(storage.state_dict())
    a, b = storage.rollout("agent"), again.rollout("agent")
    assert a.shape == b.shape and again.steps == storage.steps
    for name in ("obs", "next_obs", "action", "reward", "terminated", "truncated", "step",
                 "first", "valid"):
        np.testing.assert_array_equal(getattr(a, name)[a.valid], getattr(b, name)[b.valid])
    np.testing.assert_array_equal(a.valid, b.valid)


def test_clearing_starts_every_sequence_again_at_zero():
    storage, runner = fill({"env": {"id": "spread", "num_envs": 2}}, 10)
    storage.clear()
    assert storage.rollout("agent") is None
    for pid, batch in runner.step().items():
        storage.add(pid, batch)
    r = storage.rollout("agent")
    assert r.shape == (1, 2, 3) and r.valid.all()

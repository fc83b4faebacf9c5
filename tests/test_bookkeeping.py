"""Transition bookkeeping over random turn orders, deaths and reward streams."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from helpers import aec_returns, make_runner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interplay import register_env
from interplay.envs.toy import Move, ScriptedTurnGame, ShiftingCrowd
from interplay.run.transitions import TransitionBook


@st.composite
def plans(draw):
    n = draw(st.integers(2, 4))
    agents = [f"player_{i}" for i in range(n)]
    moves = []
    for _ in range(draw(st.integers(1, 12))):
        paid = draw(st.lists(st.sampled_from(agents), max_size=n, unique=True))
        rewards = {a: draw(st.sampled_from([-2.0, -0.5, 0.25, 1.0, 3.0])) for a in paid}
        dies = draw(st.lists(st.sampled_from(agents), max_size=1))
        moves.append(Move(rewards, terminate=dies, skip=draw(st.integers(0, 2))))
    truncate = draw(st.one_of(st.none(), st.integers(1, 12)))
    cut = draw(st.one_of(st.none(), st.integers(1, 14)))
    return n, moves, truncate, cut


def _episodes_per_stream(batches):
    """(copy, agent) -> list of episodes, each a list of transition rows."""
    streams: dict[tuple[int, str], list[list[tuple]]] = defaultdict(lambda: [[]])
    for agents, t in batches:
        for i in range(len(t)):
            key = (int(t.env[i]), agents[int(t.slot[i])])
            row = (float(t.reward[i]), bool(t.terminated[i]), bool(t.truncated[i]))
            streams[key][-1].append(row)
            if row[1] or row[2]:
                streams[key].append([])
    return streams


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans(), num_envs=st.integers(1, 3), stack=st.integers(1, 2), self_play=st.booleans())
def test_transitions_carry_every_reward_exactly_once(plan, num_envs, stack, self_play):
    n, moves, truncate, cut = plan
    register_env("hyp_game", lambda: ScriptedTurnGame(n, moves, truncate_after=truncate))
    data = {
        "env": {"id": "hyp_game", "num_envs": num_envs},
        "train": {"max_steps_per_episode": cut, "self_play": self_play},
        "policies": {("shared" if self_play else "player"): {"stack_size": stack}},
    }
    runner = make_runner(data)
    runner.reset(seed=1)
    batches = []
    started = 0
    for _ in range(120):
        started += int(runner._step.acting.sum())
        for pid, t in runner.step().items():
            batches.append((runner.specs[pid].agents, t))
    still_open = sum(int(g.book.open.sum()) for g in runner.groups)
    held = sum(len(h) for h in runner.holds.values())  # closed, its episode still going
    closed = sum(len(t) for _, t in batches)
    assert started == closed + held + still_open  # every opened transition closes exactly once

    # Reference: one episode of the same game, the standard way, without the runner's cut.
    reference = ScriptedTurnGame(n, moves, truncate_after=truncate)
    expected = aec_returns(reference, 0, lambda o, a: 0)[0]
    for (_e, agent), episodes in _episodes_per_stream(batches).items():
        assert episodes[-1] == []  # only whole episodes are handed out
        for ep in episodes[:-1]:
            assert sum(1 for r in ep if r[1] or r[2]) == 1 and (ep[-1][1] or ep[-1][2])
            if cut is None:
                assert sum(r[0] for r in ep) == expected[agent]
                if truncate is not None and ep[-1][2]:
                    assert not ep[-1][1]


def test_rewards_before_the_first_action_go_to_the_first_transition():
    plan = [Move({"player_1": 5.0}), Move({"player_1": 1.0, "player_0": 2.0})]
    register_env("early_pay", lambda: ScriptedTurnGame(2, plan))
    runner = make_runner({"env": {"id": "early_pay"}})
    runner.reset(seed=0)
    got = defaultdict(float)
    flags = {}
    for _ in range(3):
        for pid, t in runner.step().items():
            for i in range(len(t)):
                agent = runner.specs[pid].agents[int(t.slot[i])]
                got[agent] += float(t.reward[i])
                flags[agent] = (bool(t.terminated[i]), bool(t.truncated[i]))
    # player_1 was paid 5 before it ever moved; RLlib drops that, we keep it.
    assert got["player_1"] == 6.0 and got["player_0"] == 2.0
    assert flags == {"player_0": (True, False), "player_1": (True, False)}


def test_parallel_transitions_close_every_step_and_at_departure():
    register_env("crowd_b", ShiftingCrowd)
    runner = make_runner({"env": {"id": "crowd_b"}})
    runner.reset(seed=0)
    rows = []
    for _ in range(10):
        for pid, t in runner.step().items():
            agents = runner.specs[pid].agents
            rows += [(agents[int(s)], bool(te), bool(tr)) for s, te, tr in zip(t.slot, t.terminated, t.truncated, strict=True)]
    ends = {a: (te, tr) for a, te, tr in rows if te or tr}
    # a_0 leaves at step 4, a_3 at 6, a_1 at 7 (terminated); a_2 is cut by the step limit.
    assert ends == {"a_0": (True, False), "a_3": (True, False), "a_1": (True, False), "a_2": (False, True)}
    assert sum(1 for a, *_ in rows if a == "a_2") == 10


def test_book_refuses_to_open_twice():
    book = TransitionBook(1, 1, 2, (), np.int64, 0)
    e, s = np.array([0]), np.array([0])
    book.start(e, s, np.zeros((1, 2)), np.zeros(1, np.int64), None, {})
    try:
        book.start(e, s, np.zeros((1, 2)), np.zeros(1, np.int64), None, {})
    except RuntimeError as err:
        assert "still open" in str(err)
    else:
        raise AssertionError("opening an open transition must fail")

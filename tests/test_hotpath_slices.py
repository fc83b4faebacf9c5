"""The book hands whole ``[E, k]`` slices (``Transitions.grid``) where every agent of every copy
closed a transition; rollout and replay storage write them whole, and hold exactly what the
row-by-row path holds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import make_runner

from interplay.data.replay import ReplayBuffer
from interplay.data.rollout import RolloutStorage
from interplay.run.transitions import Transitions


def _batches(data: dict, steps: int, complete: bool) -> list[dict[str, Transitions]]:
    runner = make_runner(data)
    if not complete:
        runner.holds = None
    runner.reset(0)
    return [runner.step() for _ in range(steps)], runner


def _rows(t: Transitions) -> Transitions:
    return dataclasses.replace(t, grid=None)


@pytest.mark.parametrize("complete", [False, True])
def test_slices_fill_the_rollout_as_rows_do(complete):
    batches, runner = _batches({"env": {"id": "spread", "num_envs": 2}}, 60, complete)
    grids = [t.grid for out in batches for t in out.values()]
    assert grids and all(g is not None and g[1:] == (2, 3) for g in grids)
    if complete:  # whole episodes of 25 steps, handed out when they end
        assert {g[0] for g in grids} == {25}
    stores = [RolloutStorage({"agent": 3}, 2) for _ in range(2)]
    for out in batches:
        for pid, t in out.items():
            stores[0].add(pid, t)
            stores[1].add(pid, _rows(t))
    a, b = stores[0].rollout("agent"), stores[1].rollout("agent")
    for field in dataclasses.fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, dict):
            assert x.keys() == y.keys()
            for name in x:
                np.testing.assert_array_equal(x[name], y[name])
        elif x is not None:
            np.testing.assert_array_equal(x, y, err_msg=field.name)


def test_a_rollout_part_filled_row_by_row_takes_slices_at_each_agents_own_time():
    batches, _ = _batches({"env": {"id": "spread", "num_envs": 2}}, 4, False)
    store = RolloutStorage({"agent": 3}, 2)
    first = batches[0]["agent"]
    store.add("agent", first.select(np.arange(len(first)) != 1))  # one agent closed nothing
    for out in batches[1:]:
        store.add("agent", out["agent"])  # uneven counts: row by row
    r = store.rollout("agent")
    assert r.valid.sum() == 4 * 6 - 1 and r.valid[:3].all()


@pytest.mark.parametrize("complete", [False, True])
def test_slices_fill_the_replay_buffer_as_rows_do(complete):
    batches, _ = _batches({"env": {"id": "spread", "num_envs": 2}}, 60, complete)
    buffers = [ReplayBuffer(500, 18, mask_dim=5) for _ in range(2)]
    for out in batches:
        for t in out.values():
            buffers[0].add(t, "agent")
            buffers[1].add(_rows(t), "agent")
    a, b = buffers
    assert a.added == b.added == (300 if complete else 360)  # held episodes: two of 25 steps
    for name in ("obs", "next_obs", "action", "reward", "terminated", "truncated", "serial",
                 "next"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(a.streams["agent"], b.streams["agent"])

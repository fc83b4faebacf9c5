"""Vector envs hand each policy group's agents as ``[E, k, ...]`` blocks (``VecStep.groups``).

A group whose agents sit side by side in the env's buffers is a view of them; one whose agents
are interleaved with another group's is gathered each step. Either way the blocks hold what the
per-agent arrays hold, in the group's slot order, on sync, async and native envs.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from interplay.envs.async_vec import AsyncVecEnv
from interplay.envs.batch import ActionBlocks
from interplay.envs.native.spread import Spread
from interplay.envs.swarm import Swarm
from interplay.envs.vector import SyncVecEnv

GROUPS = {"even": ("bee_0", "bee_2", "bee_4"), "odd": ("bee_1", "bee_3"), "all": tuple(
    f"bee_{i}" for i in range(5))}


def _assert_groups_match(env, step, groups) -> None:
    col = {a: i for i, a in enumerate(env.agents)}
    for pid, agents in groups.items():
        g = step.groups[pid]
        cols = [col[a] for a in agents]
        np.testing.assert_array_equal(g.obs, np.stack([step.obs[a] for a in agents], axis=1))
        np.testing.assert_array_equal(g.final_obs,
                                      np.stack([step.final_obs[a] for a in agents], axis=1))
        if g.mask is not None:
            np.testing.assert_array_equal(g.mask, np.stack([step.mask[a] for a in agents], 1))
        for name in ("acting", "reward", "terminated", "truncated"):
            np.testing.assert_array_equal(getattr(g, name), getattr(step, name)[:, cols])


def _steps(env, groups, n: int = 12) -> None:
    env.group(groups)
    rng = np.random.default_rng(0)
    step = env.reset(seed=3)
    _assert_groups_match(env, step, groups)
    for _ in range(n):
        block = rng.integers(5, size=(env.num_envs, len(env.agents)))
        step = env.step(ActionBlocks([(tuple(env.agents), block)]))
        _assert_groups_match(env, step, groups)


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_interleaved_and_adjacent_groups_hold_their_agents(vectorization):
    make = partial(Swarm, n_agents=5, max_cycles=4)  # episodes end within the test
    env = (SyncVecEnv(make, 2) if vectorization == "sync"
           else AsyncVecEnv(make, 2, num_workers=1))
    try:
        _steps(env, GROUPS)
    finally:
        env.close()


def test_an_adjacent_group_is_a_view_of_the_env_buffers():
    env = SyncVecEnv(lambda: Swarm(n_agents=5), 2)
    env.group(GROUPS)
    step = env.reset(seed=0)
    assert np.shares_memory(step.groups["all"].obs, step.obs["bee_3"])
    assert not np.shares_memory(step.groups["even"].obs, step.obs["bee_2"])  # gathered
    assert np.shares_memory(step.groups["all"].reward, step.reward)


def test_a_native_env_writes_its_group_block_in_place():
    env = Spread(num_envs=3, N=3, max_cycles=5)
    groups = {"agent": ("agent_0", "agent_1", "agent_2"), "pair": ("agent_2", "agent_0")}
    _steps(env, groups, n=7)
    step = env.current_step()
    block = step.groups["agent"].obs
    assert block.shape == (3, 3, env.obs_dim) and block.flags.c_contiguous


def test_a_second_runner_on_one_env_keeps_the_first_ones_groups():
    env = SyncVecEnv(lambda: Swarm(n_agents=5), 1)
    env.group({"even": GROUPS["even"]})
    env.group({"odd": GROUPS["odd"]})
    step = env.reset(seed=0)
    assert set(step.groups) == {"even", "odd"}
    _assert_groups_match(env, step, {"even": GROUPS["even"], "odd": GROUPS["odd"]})

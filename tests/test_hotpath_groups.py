"""Vector envs hand each policy group's agents as ``[E, k, ...]`` blocks (``VecStep.groups``).

A group whose agents sit side by side in the env's buffers is a view of them; one whose agents
are interleaved with another group's is gathered each step. Either way the blocks hold what the
per-agent arrays hold, in the group's slot order, on sync, async and native envs.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from gymnasium import spaces

from interplay.envs.async_vec import AsyncVecEnv
from interplay.envs.batch import ActionBlocks
from interplay.envs.native.spread import Spread
from interplay.envs.spaces import ObservationError
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


class _Views(Swarm):
    """A swarm whose agents see 6x6x3 pictures (many agents: their block is written whole),
    one of which, ``bee_9``'s at step 2, may be laid out wrong (``bad``)."""

    def __init__(self, bad: str | None = None):
        super().__init__(n_agents=40)
        self._obs_space = spaces.Box(-9.0, 9.0, (6, 6, 3), np.float32)
        self.bad = bad

    def _observe(self):
        obs, dist = super()._observe()
        pics = {a: np.full((6, 6, 3), float(i % 7), np.float32) for i, a in enumerate(obs)}
        if self.t == 2 and self.bad is not None:
            pics["bee_9"] = {"transposed": np.zeros((6, 3, 6), np.float32),
                             "short": np.zeros((5, 6, 3), np.float32)}[self.bad]
        return pics, dist


def test_a_block_of_pictures_is_written_whole_and_read_as_the_env_gave_it():
    env = SyncVecEnv(_Views, 2)
    env.group({"bees": tuple(env.agents)})
    env.reset(seed=0)
    step = env.step(ActionBlocks([(tuple(env.agents), np.zeros((2, 40), np.int64))]))
    want = np.stack([np.full(108, float(i % 7), np.float32) for i in range(40)])
    np.testing.assert_array_equal(step.groups["bees"].obs, np.stack([want, want]))


@pytest.mark.parametrize("bad", ["transposed", "short"])
def test_a_picture_laid_out_wrong_in_a_whole_block_is_named_with_its_agent(bad):
    env = SyncVecEnv(lambda: _Views(bad), 1)
    env.reset(seed=0)
    actions = ActionBlocks([(tuple(env.agents), np.zeros((1, 40), np.int64))])
    env.step(actions)
    with pytest.raises(ObservationError, match=r"at step 2 of its episode: agent 'bee_9'"):
        env.step(actions)

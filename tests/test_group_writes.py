"""The vector env writes a group's observations, rewards and actions as whole blocks.

Agents that sit side by side in one buffer block are written with one stacked write per copy
and step; these tests hold the blocks against what the env handed over, agent by agent, on envs
with one block (the swarm), several (simple_tag's two kinds of agents) and agents that take
turns, and check that a bad value in a block is still named with its agent.
"""

from __future__ import annotations

import numpy as np
import pytest
from broken_envs import WrongObs

from interplay.envs.adapters import EnvContractError
from interplay.envs.batch import ActionBlocks
from interplay.envs.registry import env_factory
from interplay.envs.spaces import ObservationError
from interplay.envs.toy.swarm import Swarm
from interplay.envs.vector import SyncVecEnv


def _random_actions(env: SyncVecEnv, rng: np.random.Generator) -> ActionBlocks:
    """One block holding every agent's actions, as the runner hands them over."""
    block = np.stack([rng.integers(env.action_spaces[a].n, size=env.num_envs)
                      for a in env.agents], axis=1)
    return ActionBlocks([(tuple(env.agents), block)])


def _assert_blocks_hold_the_env_values(env: SyncVecEnv, step) -> None:
    for e in range(env.num_envs):
        for a, o in step.raw_obs[e].items():
            view = env.obs_views[a]
            want = np.asarray(o, dtype=step.obs[a].dtype).reshape(-1) if view.plain else None
            if want is not None:
                np.testing.assert_array_equal(step.obs[a][e], want, err_msg=f"{a} copy {e}")
            assert step.acting[e, env.agents.index(a)]


@pytest.mark.parametrize("make", [
    lambda: Swarm(n_agents=7, max_cycles=9),
    lambda: Swarm(n_agents=1100, max_cycles=9),  # a block big enough to be stacked in place
    env_factory("mpe2.simple_tag_v3", {"max_cycles": 9, "num_good": 8, "num_adversaries": 9},
                "parallel"),
], ids=["one_block", "one_big_block", "two_blocks"])
def test_blocks_hold_what_the_env_gave_each_agent(make):
    env = SyncVecEnv(make, num_envs=3, raw_obs=True)
    rng = np.random.default_rng(0)
    step = env.reset(seed=0)
    _assert_blocks_hold_the_env_values(env, step)
    for _ in range(25):  # across episode ends (9 steps each)
        step = env.step(_random_actions(env, rng))
        _assert_blocks_hold_the_env_values(env, step)
    env.close()


def test_a_copys_moves_are_its_row_of_the_action_block():
    seen = []

    class Recording(Swarm):
        def step(self, actions):
            seen.append(dict(actions))
            return super().step(actions)

    env = SyncVecEnv(lambda: Recording(n_agents=5, max_cycles=50), num_envs=2)
    env.reset(seed=1)
    block = np.arange(10).reshape(2, 5) % 5
    env.step(ActionBlocks([(tuple(env.agents), block)]))
    assert [list(map(int, s.values())) for s in seen] == block.tolist()
    assert all(list(s) == env.agents for s in seen)
    env.close()


def test_rewards_in_a_new_order_land_on_their_agents():
    class Shuffled(Swarm):
        def step(self, actions):
            obs, rew, term, trunc, info = super().step(actions)
            order = list(rew)[::-1] if self.t % 2 else list(rew)
            return obs, {a: float(self.possible_agents.index(a)) for a in order}, term, trunc, info

    env = SyncVecEnv(lambda: Shuffled(n_agents=10, max_cycles=50), num_envs=2)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(4):
        step = env.step(_random_actions(env, rng))
        np.testing.assert_array_equal(step.reward, np.tile(np.arange(10.0), (2, 1)))
    env.close()


def test_a_reward_that_is_no_number_is_named_with_its_agent():
    class Broken(Swarm):
        def step(self, actions):
            obs, rew, term, trunc, info = super().step(actions)
            rew["bee_3"] = "lots"
            return obs, rew, term, trunc, info

    env = SyncVecEnv(lambda: Broken(n_agents=10, max_cycles=50), num_envs=1)
    env.reset(seed=0)
    with pytest.raises(EnvContractError, match="reward of agent 'bee_3' is 'lots'"):
        env.step(_random_actions(env, np.random.default_rng(0)))


@pytest.mark.parametrize("bad", ["short", "nested", "text", "objects", "complex", "none"])
def test_a_bad_observation_of_one_of_a_few_agents_is_named(bad):
    env = SyncVecEnv(lambda: WrongObs(at=2, bad=bad), num_envs=2)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    env.step(_random_actions(env, rng))
    with pytest.raises(ObservationError, match=r"env copy 0, at step 2 of its episode: agent 'a_1'"):
        env.step(_random_actions(env, rng))


@pytest.mark.parametrize("bad", ["short", "text", "none"])
def test_a_bad_observation_in_a_big_block_is_named_with_its_agent(bad):
    class Broken(Swarm):
        def _observe(self):
            obs, dist = super()._observe()
            if self.t == 2:
                obs["bee_700"] = {"short": obs["bee_700"][:3], "text": np.array(list("abcd")),
                                  "none": None}[bad]
            return obs, dist

    env = SyncVecEnv(lambda: Broken(n_agents=1100, max_cycles=50), num_envs=1)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    env.step(_random_actions(env, rng))
    with pytest.raises(ObservationError, match=r"at step 2 of its episode: agent 'bee_700'"):
        env.step(_random_actions(env, rng))

"""Gymnasium multi-agent envs through ``gymma:<id>``: tuple spaces become agents, a list of
rewards becomes per-agent rewards, the time limit is truncation, the global state is kept."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from helpers import read_metrics, straight_and_resumed

from interplay.cli import main
from interplay.config.loading import load
from interplay.envs.adapters import adapt
from interplay.envs.batch import state_space_of
from interplay.envs.gymma import GymmaError
from interplay.envs.registry import env_factory
from interplay.experiment.loop import train

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


class TinyTeam(gymnasium.Env):
    """Two agents say 0, 1 or 2; each is paid what it said; the episode ends (done) when both
    say 2. ``shared``: one team reward (the sum) instead of a list. ``max_steps``: an own
    step limit at which ``done`` is set, the way rware reports its limit. ``idle``: nothing is
    ever paid and only the time limit ends an episode."""

    def __init__(self, shared: bool = False, max_steps: int | None = None, with_state: bool = False,
                 idle: bool = False):
        box = spaces.Box(0.0, 10.0, (3,), np.float32)
        self.observation_space = spaces.Tuple((box, box))
        self.action_space = spaces.Tuple((spaces.Discrete(3), spaces.Discrete(3)))
        self.shared, self.idle = shared, idle
        if max_steps is not None:
            self.max_steps = max_steps
        if with_state:
            self.get_state = lambda: np.array([self.t, *self.last], np.float32)
            self.get_state_size = lambda: 3
        self.t, self.last = 0, [0, 0]

    def _obs(self):
        return tuple(np.array([self.t, *self.last], np.float32) for _ in range(2))

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.last = 0, [0, 0]
        return self._obs(), {}

    def step(self, actions):
        self.t += 1
        self.last = [int(a) for a in actions]
        rewards = [0.0 if self.idle else float(a) for a in self.last]
        done = (self.last == [2, 2] and not self.idle) or self.t >= getattr(self, "max_steps", 10**9)
        return self._obs(), sum(rewards) if self.shared else rewards, done, False, {}


ID = "interplay-tests/TinyTeam-v0"
gymnasium.register(ID, entry_point=TinyTeam, max_episode_steps=5)


def run_episode(env, actions):
    copy = adapt(env, None)
    cs = copy.reset(seed=0)
    booked = dict.fromkeys(copy.possible_agents, 0.0)
    for joint in actions:
        cs = copy.step(dict(zip(copy.possible_agents, joint, strict=True)))
        for a, r in cs.rewards.items():
            booked[a] += r
        if cs.over:
            break
    return cs, booked


def test_agents_come_from_the_tuple_spaces_and_rewards_from_the_list():
    env = env_factory(f"gymma:{ID}")()
    assert env.possible_agents == ["agent_0", "agent_1"]
    assert env.action_space("agent_1") == spaces.Discrete(3)
    cs, booked = run_episode(env, [(0, 1), (2, 0), (2, 2)])
    assert cs.over and set(cs.terminated) == {"agent_0", "agent_1"} and not cs.truncated
    assert booked == {"agent_0": 4.0, "agent_1": 3.0}


def test_the_gymnasium_time_limit_is_truncation():
    cs, _ = run_episode(env_factory(f"gymma:{ID}")(), [(0, 0)] * 9)
    assert set(cs.truncated) == {"agent_0", "agent_1"} and not cs.terminated


def test_done_at_the_envs_own_step_limit_is_truncation_and_earlier_done_termination():
    make = env_factory(f"gymma:{ID}", {"max_steps": 3, "max_episode_steps": None})
    cs, _ = run_episode(make(), [(0, 0)] * 9)
    assert set(cs.truncated) == {"agent_0", "agent_1"} and not cs.terminated
    cs, _ = run_episode(make(), [(2, 2)])
    assert set(cs.terminated) == {"agent_0", "agent_1"} and not cs.truncated


def test_one_shared_reward_goes_to_every_agent():
    _, booked = run_episode(env_factory(f"gymma:{ID}", {"shared": True})(), [(1, 2), (2, 2)])
    assert booked == {"agent_0": 7.0, "agent_1": 7.0}


def test_the_envs_global_state_is_kept_where_it_offers_one():
    env = env_factory(f"gymma:{ID}", {"with_state": True})()
    copy = adapt(env, None)
    assert state_space_of(copy, "auto") == spaces.Box(-np.inf, np.inf, (3,), np.float32)
    copy.reset(seed=0)
    copy.step({"agent_0": 1, "agent_1": 2})
    assert env.state().tolist() == [1.0, 1.0, 2.0]
    assert state_space_of(adapt(env_factory(f"gymma:{ID}")(), None), "auto") is None


@pytest.mark.parametrize(("env_id", "named"), [
    ("gymma:CartPole-v1", "not a Tuple with one space per agent"),
    ("gymma:NoSuchEnv-v0", "gymnasium.make cannot build it"),
    ("gymma:", "names no env"),
])
def test_envs_of_another_kind_are_named(env_id, named):
    with pytest.raises(GymmaError, match=named):
        env_factory(env_id)


def test_a_run_folder_naming_a_family_id_needs_trust_only_for_a_package_of_its_own():
    from interplay.experiment.run_store.trust import untrusted_code

    assert untrusted_code({"env": {"id": "openspiel:kuhn_poker"}}) == {}
    assert untrusted_code({"env": {"id": "gymma:rware-tiny-2ag-v2"}}) == {}  # an env package
    assert untrusted_code({"env": {"id": "gymma:my_envs:Team-v0"}}) == {
        "my_envs": ["env.id 'gymma:my_envs:Team-v0'"]}


def test_check_passes_and_warns_when_every_episode_is_cut_without_reward(capsys):
    assert main(["check", f"gymma:{ID}", "--cycles", "30"]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and "passed the PettingZoo API test" in out
    assert "ended by truncation with zero reward" not in out
    assert main(["check", f"gymma:{ID}", "--cycles", "30", "-s", "env.kwargs.idle=true"]) == 0
    out = capsys.readouterr().out
    assert "warn  every checked episode (6) ended by truncation with zero reward" in out


def test_ippo_trains_on_it(tmp_path):
    cfg = load([], [f"env.id=gymma:{ID}", "env.num_envs=2", "algo.name=ippo", "algo.rollout=16", "algo.epochs=1",
                    "train.steps=64", "log.every=64", *QUIET])
    train(cfg, tmp_path)
    row = read_metrics(tmp_path)[-1]
    assert row["env_steps"] == 64 and "agent_return_mean/agent_1" in row


def test_rware_ends_at_its_step_limit_by_truncation():
    pytest.importorskip("rware")
    env = env_factory("gymma:rware-tiny-2ag-v2", {"max_steps": 12})()
    cs, _ = run_episode(env, [(0, 0)] * 20)
    assert set(cs.truncated) == {"agent_0", "agent_1"} and not cs.terminated


def test_a_resumed_run_is_the_run_it_continues(tmp_path):
    straight, resumed = straight_and_resumed(
        [f"env.id=gymma:{ID}", "env.num_envs=2", "algo.name=random", "log.every=30",
         "checkpoint.every=30", *QUIET], 60, tmp_path)
    assert straight == resumed

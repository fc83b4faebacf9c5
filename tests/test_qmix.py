"""VDN and QMIX: the mix, agents that leave, what they refuse, learning (their exact resume is
tests/test_algo_matrix.py's)."""

from __future__ import annotations

import pytest
import torch
from helpers import read_metrics

from interplay import register_env
from interplay.algos.qmix import Mixer
from interplay.config.loading import load
from interplay.envs.toy import ShiftingCrowd
from interplay.errors import ConfigError
from interplay.experiment.loop import Experiment, train

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
FAST = ["algo.learning_starts=200", "algo.batch_size=32", "algo.train_every=4"]


def test_the_mix_is_monotonic_in_every_agents_value():
    torch.manual_seed(0)
    mixer = Mixer(agents=4, state_dim=6, hidden=8, hyper=16)
    q = torch.randn(64, 4, requires_grad=True)
    mixer(q, torch.randn(64, 6)).sum().backward()
    assert q.grad is not None and (q.grad >= 0).all()


@pytest.mark.parametrize("name", ["vdn", "qmix"])
def test_agents_that_come_and_go_train_without_nan_and_beat_random(tmp_path, name):
    register_env("crowd_qmix", ShiftingCrowd)
    common = ["env.id=crowd_qmix", "env.num_envs=4", "train.test_frequency=3000",
              "train.test_episodes=20", *QUIET]
    train(load([], [*common, f"algo.name={name}", *FAST, "algo.exploration_steps=1500",
                    "train.steps=3000"]), tmp_path / "q")
    train(load([], [*common, "algo.name=random", "train.steps=3000"]), tmp_path / "r")
    q = [r for r in read_metrics(tmp_path / "q") if r["phase"] == "test"][-1]
    rnd = [r for r in read_metrics(tmp_path / "r") if r["phase"] == "test"][-1]
    trained = [r for r in read_metrics(tmp_path / "q") if r["phase"] == "train"]
    assert all(r.get("loss") is None or r["loss"] == r["loss"] for r in trained)  # no NaN
    assert q["episode_return_mean"] > rnd["episode_return_mean"] + 2.0


@pytest.mark.parametrize(("extra", "message"), [
    (["env.id=spread", "policies.a.agents=[agent_0]", "policies.b={agents: [agent_1, agent_2], "
      "type: random}"], r"every agent must be trained by it; policies \['b'\] are random"),
    (["env.id=pettingzoo.classic.tictactoe_v3"], "turn-based"),
    (["env.id=spread", "env.kwargs={continuous_actions: true}"], "discrete"),
])
def test_what_a_team_learner_cannot_learn_is_refused(tmp_path, extra, message):
    with pytest.raises(ConfigError, match=message):
        Experiment(load([], ["algo.name=qmix", *QUIET, *extra]), tmp_path / "run")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["vdn", "qmix"])
def test_a_team_learner_improves_on_spread(tmp_path, name, learning_result):
    run = tmp_path / name
    train(load([], [f"algo.name={name}", "env.id=spread", "env.num_envs=16",
                    "train.steps=60000", "train.test_frequency=60000",
                    "train.test_episodes=64", *QUIET]), run)
    test = [r for r in read_metrics(run) if r["phase"] == "test"][-1]
    per_agent = test["episode_return_mean"] / 3
    learning_result(env="spread", algo=name, steps=60_000, score=per_agent, random=-26.0)
    assert per_agent > -23.0


def test_team_n_step_targets_fold_the_team_reward_within_the_episode():
    from types import SimpleNamespace

    import numpy as np

    from interplay.algos.qmix import VDN, VDNSettings
    from interplay.data.replay import Group, JointReplayBuffer
    from interplay.run.transitions import Transitions

    buf = JointReplayBuffer(16, {"a": Group(2, 1)})
    for t, (rewards, present, done) in enumerate([((1.0, 3.0), (1, 1), (0, 0)),
                                                  ((2.0, 0.0), (1, 0), (0, 0)),
                                                  ((4.0, 4.0), (1, 1), (1, 1)),
                                                  ((8.0, 8.0), (1, 1), (0, 0))]):
        slots = [i for i in range(2) if present[i]]
        n = len(slots)
        tr = Transitions(
            obs=np.zeros((n, 1), np.float32), action=np.zeros(n, np.int64),
            reward=np.array([rewards[i] for i in slots]), next_obs=np.zeros((n, 1), np.float32),
            terminated=np.array([bool(done[i]) for i in slots]), truncated=np.zeros(n, bool),
            env=np.zeros(n, np.int64), slot=np.array(slots), mask=None, next_mask=None,
            extras={}, step=np.full(n, t), first=np.full(n, t in (0, 3)))
        copies, joined = buf.join({"a": tr})
        buf.add(joined, copies, buf._starts)
    for mode, team in (("sum", [4.0, 2.0, 8.0, 16.0]), ("mean", [2.0, 2.0, 4.0, 8.0])):
        fake = SimpleNamespace(settings=VDNSettings(n_step=3, gamma=0.5, team_reward=mode),
                               policies={"a": None})
        fake._team_reward = lambda b, pos, f=fake: VDN._team_reward(f, b, pos)
        end, ret, discount = VDN._fold(fake, buf, np.array([0, 1, 2, 3]))
        # rows 0-2 are one episode (it ends at row 2), row 3 starts the next
        assert end.tolist() == [2, 2, 2, 3]
        expected = [team[0] + 0.5 * team[1] + 0.25 * team[2], team[1] + 0.5 * team[2],
                    team[2], team[3]]
        assert np.allclose(ret, expected), mode
        assert np.allclose(discount, [0.125, 0.25, 0.5, 0.5])

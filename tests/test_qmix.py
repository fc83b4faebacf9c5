"""VDN and QMIX: the mix, agents that leave, what they refuse, exact resume, learning."""

from __future__ import annotations

import pytest
import torch
from helpers import read_metrics

from interplay import register_env
from interplay.algos.qmix import Mixer
from interplay.config.schema import ConfigError, load
from interplay.envs.toy import ShiftingCrowd
from interplay.experiment.loop import Experiment, resume, train

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


@pytest.mark.parametrize("name", ["vdn", "qmix"])
def test_a_team_learner_resumes_exactly(tmp_path, name):
    common = [f"algo.name={name}", "env.id=spread", "env.num_envs=2", *FAST, *QUIET,
              "log.every=100", "train.test_frequency=150", "train.test_episodes=2"]
    train(load([], [*common, "train.steps=600"]), tmp_path / "straight")
    train(load([], [*common, "train.steps=300"]), tmp_path / "split")
    resume(tmp_path / "split", ["train.steps=600"])
    skip = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}
    a = [{k: v for k, v in r.items() if k not in skip} for r in read_metrics(tmp_path / "straight")]
    b = [{k: v for k, v in r.items() if k not in skip} for r in read_metrics(tmp_path / "split")]
    assert a == b and any("loss" in r for r in a)


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
def test_a_team_learner_improves_on_spread(tmp_path, name):
    run = tmp_path / name
    train(load([], [f"algo.name={name}", "env.id=spread", "env.num_envs=16",
                    "train.steps=60000", "train.test_frequency=60000",
                    "train.test_episodes=64", *QUIET]), run)
    test = [r for r in read_metrics(run) if r["phase"] == "test"][-1]
    per_agent = test["episode_return_mean"] / 3
    print(f"{name} on spread after 60k env steps: {per_agent:.1f} per agent (random: about -26)")
    assert per_agent > -23.0

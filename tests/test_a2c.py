"""A2C: an on-policy algorithm written as one file over the on-policy base."""

from __future__ import annotations

import math

import pytest
from test_ppo import build, drive, greedy_return

from interplay.algos import REGISTRY
from interplay.algos.a2c import A2C
from interplay.algos.onpolicy import OnPolicy


def test_a2c_registers_itself_over_the_on_policy_base():
    assert REGISTRY["a2c"] is A2C and issubclass(A2C, OnPolicy)
    settings = A2C.Settings(name="a2c")
    assert (settings.epochs, settings.minibatches) == (1, 1)  # each rollout learned from once


def test_a2c_beats_random_on_spread():
    env = {"id": "spread", "num_envs": 32}
    _, algo, runner = build(env, {"name": "a2c"}, seed=0)
    metrics = drive(runner, algo, 400)  # 12,800 env steps, about a second
    # Transitions reach the rollout when a copy's episode (25 steps) ends, so some of the
    # 16-step rollouts hold none and update nothing.
    learned = [m for m in metrics if "policy_loss/agent" in m]
    assert len(metrics) == 25 and len(learned) >= 12
    assert greedy_return(env, algo) > -25.0  # random actions: -26.4; seed 0 gave -23.9


@pytest.mark.parametrize(("env", "extra"), [
    ({"id": "speaker_listener", "num_envs": 4}, {"centralised_critic": True}),
    ({"id": "spread", "num_envs": 4}, {"model": {"recurrent": "gru", "recurrent_size": 8}}),
])
def test_a2c_takes_the_bases_centralised_and_recurrent_critics(env, extra):
    _, algo, runner = build(env, {"name": "a2c", **extra}, seed=1)
    metrics = [m for m in drive(runner, algo, 50) if len(m) > 1]  # two episodes per copy
    assert metrics and all(math.isfinite(v) for m in metrics for v in m.values())
    if extra.get("centralised_critic"):
        assert algo.joint_dim == 3 + 11  # the speaker's and the listener's observations

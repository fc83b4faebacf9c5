"""The on-policy base: a centralised critic's joint input is the group blocks reshaped."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_ppo import FAST, TOY_ENVS, build

from interplay.algos.onpolicy import samples as samples_module
from interplay.algos.onpolicy.samples import policy_samples


def _inputs(env_name: str, steps: int):
    _, algo, runner = build(TOY_ENVS[env_name], {"name": "mappo", **FAST, "rollout": 64})
    runner.reset(0)
    for _ in range(steps):
        for pid, batch in runner.step().items():
            algo.collect(pid, batch)
        algo.ready()
    data = {pid: policy_samples(algo.policies[pid], algo.storage.rollout(pid))
            for pid in algo.trained}
    groups = {pid: (len(algo.specs[pid].agents), algo.specs[pid].obs_dim) for pid in data}
    return data, algo.critic_inputs(data), samples_module._in_lockstep(data, groups)


@pytest.mark.parametrize("env_name", ["spread", "speaker_listener"])
def test_lockstep_groups_give_the_joint_input_by_reshape_as_scattering_would(env_name, monkeypatch):
    data, inputs, lockstep = _inputs(env_name, 30)  # every agent of every copy, 25 steps
    assert lockstep
    if env_name == "spread":  # one group: the joint table is its observations, not a copy
        x = inputs["agent"].now
        assert x.table is not None and x.table.data_ptr() == x.own.data_ptr()
    monkeypatch.setattr(samples_module, "_in_lockstep", lambda *_: False)
    _, scattered, _ = _inputs(env_name, 30)
    for pid, s in data.items():
        everything = torch.arange(len(s.obs))
        for ours, theirs in zip(inputs[pid], scattered[pid], strict=True):
            np.testing.assert_array_equal(ours.take(everything).numpy(),
                                          theirs.take(everything).numpy())

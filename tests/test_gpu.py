"""Runs on a CUDA device (``train.device: cuda``): skipped where torch sees none."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from helpers import newest_state, tiny_cfg

from interplay import load_policy, train


def tensors(state: Any) -> list[torch.Tensor]:
    if isinstance(state, torch.Tensor):
        return [state]
    if isinstance(state, dict):
        state = list(state.values())
    if isinstance(state, (list, tuple)):
        return [t for item in state for t in tensors(item)]
    return []


@pytest.mark.gpu
def test_a_cuda_run_learns_on_the_gpu_and_its_policy_loads_on_cpu(tmp_path):
    result = train(tiny_cfg("env.id=spread", "env.num_envs=4", "algo.name=ippo",
                            "algo.rollout=16", "algo.epochs=2", "train.steps=256",
                            "train.device=cuda"), tmp_path)
    assert result.env_steps == 256 and "policy_loss/agent" in result.rows[-1]
    # weights and optimiser moments; an optimiser's step counts stay on the CPU (0-d), and
    # NumPy state is saved as bytes
    weights = [t for t in tensors(newest_state(tmp_path, map_location=None)["algo"])
               if t.is_floating_point() and t.dim() > 0]
    assert weights and {t.device.type for t in weights} == {"cuda"}
    policy = load_policy(tmp_path)  # builds its networks on the CPU, whatever the run used
    obs = np.zeros((3, *policy.observation_space.shape), np.float32)
    actions = policy.act(obs)
    assert all(policy.action_space.contains(a) for a in actions)

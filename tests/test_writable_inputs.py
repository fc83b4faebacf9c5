"""Training hands torch no read-only NumPy arrays (torch warns: "not writable")."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from gymnasium import spaces
from pettingzoo import ParallelEnv

from interplay import register_env
from interplay.config.loading import load
from interplay.experiment.loop import train


class MaskedCrowd(ParallelEnv):
    """Three agents of one policy move at once; one action, a different one each step, is illegal.

    The runner reads such masks as one read-only view over the env's buffers.
    """

    metadata = {"name": "masked_crowd"}
    possible_agents = ["a_0", "a_1", "a_2"]

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Dict({"observation": spaces.Box(-1, 1, (3,), np.float32),
                            "action_mask": spaces.Box(0, 1, (4,), np.int8)})

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(4)

    def _obs(self) -> dict:
        mask = np.ones(4, np.int8)
        mask[self.t % 4] = 0
        return {a: {"observation": np.full(3, self.t / 10, np.float32), "action_mask": mask.copy()}
                for a in self.agents}

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        done = self.t >= 8
        out = (self._obs(), {a: float(actions[a] == 1) for a in self.agents},
               {a: done for a in self.agents}, {a: False for a in self.agents},
               {a: {} for a in self.agents})
        if done:
            self.agents = []
        return out


@pytest.fixture
def torch_warns_every_time():
    """torch says it once per process; a test before this one may have had it said."""
    torch.set_warn_always(True)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="The given NumPy array is not writable")
        yield
    torch.set_warn_always(False)


@pytest.mark.parametrize("algo", ["ippo", "mappo", "dqn"])
def test_training_with_masks_passes_torch_writable_arrays(tmp_path, algo, torch_warns_every_time):
    register_env("masked_crowd", MaskedCrowd)
    cfg = load([], ["env.id=masked_crowd", "env.num_envs=4", "train.steps=400", "log.every=100",
                    f"algo.name={algo}", "train.test_frequency=200", "train.test_episodes=2",
                    "log.console=false", "log.curve=false", "log.tensorboard=false"])
    assert train(cfg, tmp_path / "run").env_steps == 400

"""Learning from pixels with the default CNN (slow: each trains for tens of seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from interplay import config, train

QUIET = {"console": False, "tensorboard": False, "curve": False}
PRESETS = Path(__file__).resolve().parent.parent / "configs"


@pytest.mark.slow
def test_ippo_with_the_default_cnn_reads_the_colour_far_above_chance(tmp_path):
    # ColorMatch pays 1 per agent and step for naming the frame's colour: random play earns
    # 1/3 of the 25 steps, per agent; reading the frame earns all of them.
    cfg = config.validate({
        "env": {"id": "interplay.envs.pixels", "num_envs": 4},
        "algo": {"name": "ippo", "rollout": 32, "epochs": 4, "minibatches": 2, "lr": 3e-4},
        "train": {"steps": 6000, "seed": 0, "device": "cpu", "test_frequency": 6000,
                  "test_episodes": 10},
        "log": {**QUIET, "every": 3000}})
    result = train(cfg, tmp_path)
    test = [r for r in result.rows if r["phase"] == "test"][-1]
    random_return = 2 * 25 / 3
    assert test["episode_return_mean"] > 2 * random_return, test["episode_return_mean"]


@pytest.mark.slow
def test_the_pistonball_preset_trains_on_resized_grayscale_stacked_frames(tmp_path):
    pytest.importorskip("pettingzoo.butterfly")
    data = config.merge(config.read_yaml(PRESETS / "ippo_pistonball.yaml"), {
        "env": {"num_envs": 1, "kwargs": {"max_cycles": 20}},
        "algo": {"rollout": 16, "epochs": 1},
        "train": {"steps": 40, "test_frequency": 40, "test_episodes": 1, "device": "cpu"},
        "log": {**QUIET, "every": 20}})
    result = train(config.validate(data), tmp_path)
    assert result.env_steps == 40
    actor = torch.load(result.checkpoint / "state.pt", weights_only=True)["algo"]["policies"][
        "piston"]["actor"]
    assert actor["nets.0.0.0.blocks.0.convs.0.weight"].shape[1] == 3  # 3 gray frames

"""Storage keeps observations in their own dtype and refuses what the machine cannot hold."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from interplay import config, train
from interplay.data.ram import StorageSizeError, available_bytes
from interplay.errors import UserError
from interplay.experiment.run_store.statecodec import decode

QUIET = {"console": False, "tensorboard": False, "curve": False}
PIXELS = {"id": "interplay.envs.pixels", "num_envs": 2, "kwargs": {"size": 12}}


def run(tmp_path, algo: dict, steps: int = 200, env: dict = PIXELS):
    cfg = config.validate({"env": env, "algo": algo,
                           "train": {"steps": steps, "seed": 3, "device": "cpu"},
                           "log": {**QUIET, "every": steps}})
    return train(cfg, tmp_path)


def test_image_frames_stay_uint8_in_replay_and_checkpoint(tmp_path):
    result = run(tmp_path, {"name": "dqn", "buffer_size": 1000, "learning_starts": 50,
                            "batch_size": 16})
    state = decode(torch.load(result.checkpoint / "state.pt", weights_only=True))
    buffer = state["storage"]["eye"]["arrays"]
    for key in ("obs", "next_obs"):
        assert buffer[key].dtype == np.uint8, key
    assert buffer["obs"].shape == (min(1000, result.env_steps * 2), 12 * 12 * 3)
    assert buffer["obs"].max() > 1  # raw bytes, not scaled or one-hot


@pytest.mark.parametrize("algo", [
    {"name": "dqn", "buffer_size": 2 * 10**9},
    {"name": "maddpg", "buffer_size": 2 * 10**9},
])
def test_an_impossible_buffer_is_refused_before_any_step_naming_the_key(tmp_path, algo):
    env = PIXELS if algo["name"] == "dqn" else {"id": "spread", "num_envs": 2}
    with pytest.raises(StorageSizeError) as err:
        run(tmp_path, algo, env=env)
    text = str(err.value)
    assert text.startswith("algo.buffer_size: ")
    needed, free = (int(x.replace(",", "")) for x in re.findall(r"\(([\d,]+) bytes\)", text))
    assert needed > free > 0 and "lower algo.buffer_size" in text
    assert isinstance(err.value, UserError)
    assert not (tmp_path / "checkpoints").exists()


def test_the_needed_bytes_follow_the_observation_dtype():
    from interplay.data.replay import ReplayBuffer

    as_bytes = ReplayBuffer.nbytes(1000, 5292, (), np.int64, 0, np.uint8)
    as_floats = ReplayBuffer.nbytes(1000, 5292, (), np.int64, 0, np.float32)
    assert as_floats - as_bytes == 1000 * 2 * 5292 * 3
    small = ReplayBuffer(10, 4, (), np.int64, 0, np.uint8)
    assert small.obs.dtype == np.uint8 and small.next_obs.dtype == np.uint8


def test_available_memory_is_known_on_this_machine():
    free = available_bytes()  # /proc/meminfo here; the check is skipped only where it is None
    assert isinstance(free, int) and 0 < free < 2**50


def test_a_centralised_critic_too_wide_for_memory_is_refused_before_any_step(tmp_path, monkeypatch):
    import interplay.data.ram as ram

    monkeypatch.setattr(ram, "available_bytes", lambda: 50 * 2**20)  # a 50 MiB machine
    env = {"id": "interplay.envs.swarm", "num_envs": 4, "kwargs": {"n_agents": 60}}
    with pytest.raises(StorageSizeError) as err:
        run(tmp_path / "mappo", {"name": "mappo", "rollout": 64}, env=env)
    text = str(err.value)
    assert text.startswith("algo.centralised_critic: a rollout of 64 steps of 4 copies")
    assert "(15,360 rows, each with 244 critic inputs)" in text and "use ippo" in text
    assert not (tmp_path / "mappo" / "checkpoints").exists()
    run(tmp_path / "ippo", {"name": "ippo", "rollout": 64}, steps=256, env=env)  # 4 inputs a row

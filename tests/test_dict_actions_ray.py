"""Dict actions on Ray env runners: the same acting code as a local run, so the same rows."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow  # starting Ray takes seconds

from helpers import QUIET, local_numbers, untimed_metrics  # noqa: E402

from interplay.backends.ray.cluster import connect, disconnect  # noqa: E402
from interplay.config.loading import load  # noqa: E402
from interplay.config.schema import BackendConfig  # noqa: E402
from interplay.experiment.loop import train  # noqa: E402


def test_one_ray_runner_is_the_local_run(tmp_path):
    common = ["env.id=interplay.envs.aim", "env.num_envs=2", "algo.name=ippo", "algo.rollout=16",
              "algo.epochs=1", "train.steps=96", "train.test_frequency=96",
              "train.test_episodes=2", "log.every=32", "train.device=cpu", *QUIET]
    started = connect(BackendConfig(name="ray"), num_cpus=2)
    try:
        train(load([], common), tmp_path / "local")
        train(load([], [*common, "backend.name=ray", "backend.num_env_runners=1"]),
              tmp_path / "ray")
    finally:
        disconnect(started)
    local = untimed_metrics(tmp_path / "local")
    assert local_numbers(tmp_path / "ray") == local

"""Backends without Ray: the config section, the error where Ray is missing, local map."""

from __future__ import annotations

import importlib.util

import pytest

from interplay.backends import map_members
from interplay.backends.ray import RayMissingError
from interplay.config.schema import ConfigError, load
from interplay.experiment.loop import train


def test_map_members_runs_locally_in_order():
    seen = []

    def record(x):
        seen.append(x)
        return x * 10

    assert map_members(record, [3, 1, 2]) == [30, 10, 20]
    assert seen == [3, 1, 2]


@pytest.mark.parametrize(("override", "said"), [
    ("backend.nmae=ray", "backend.nmae: unknown key; did you mean backend.name?"),
    ("backend.name=spark", "backend.name: Input should be 'local' or 'ray'"),
    ("backend.num_env_runners=0", "backend.num_env_runners: Input should be greater than"),
    ("backend.cpus_per_runner=0", "backend.cpus_per_runner: Input should be greater than 0"),
    ("backend.max_restarts=-1", "backend.max_restarts: Input should be greater than"),
])
def test_bad_backend_settings_are_named(override, said):
    with pytest.raises(ConfigError) as err:
        load([], [override])
    assert said in str(err.value)


def test_ray_backend_without_ray_names_the_key_and_the_install(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ray" else real(name, *a))
    cfg = load([], ["backend.name=ray", "train.steps=64", "log.console=false"])
    with pytest.raises(RayMissingError, match=r"backend.name: ray needs Ray.*pip install "
                                              r"'interplay\[ray\]'"):
        train(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "config.yaml").exists()  # refused before any work

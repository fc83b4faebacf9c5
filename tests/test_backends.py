"""Backends without Ray: the config section, the error where Ray is missing, local map."""

from __future__ import annotations

import importlib.util
import re
import warnings

import pytest

from interplay.backends import map_members
from interplay.backends.ray import cluster as ray_backend
from interplay.backends.ray.cluster import RayMissingError
from interplay.config.loading import load
from interplay.config.schema import BackendConfig
from interplay.errors import ConfigError
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


@pytest.mark.parametrize("address", ["local", "10.0.0.1", "http://10.0.0.1:6379", "ray://",
                                     "head:99999", "head:0", "anyscale://prod", "-h:6379",
                                     "a b:6379"])
def test_an_address_that_is_not_a_ray_address_is_refused(address):
    with pytest.raises(ConfigError, match=rf"backend.address: {re.escape(repr(address))} is not "
                                          "a Ray address: use empty"):
        load([], [f"backend.address={address}"])


@pytest.mark.parametrize("address", ["", "auto", "ray://head:10001", "10.0.0.1:6379",
                                     "head.example.org:6379", "'[::1]:6379'"])
def test_ray_addresses_written_out_are_taken(address):
    assert load([], [f"backend.address={address}"]).backend.address == address.strip("'")


@pytest.fixture
def fake_ray_start(monkeypatch):
    """Ray's start, recorded instead of made: the keyword arguments of each ``ray.init``."""
    ray = pytest.importorskip("ray")
    from ray._private import ray_constants

    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append(kw))
    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: "127.0.0.1")
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", ray_constants.ENABLE_RAY_CLUSTER)
    monkeypatch.setattr(ray_backend, "machine_cores", lambda: 4)
    return calls


def test_a_ray_started_here_ignores_ray_address_in_the_environment(fake_ray_start, monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.9.9.9:6379")
    assert ray_backend.connect(BackendConfig(name="ray"), num_cpus=2) is True
    assert fake_ray_start[0]["address"] == "local" and fake_ray_start[0]["num_cpus"] == 2


def test_more_env_runners_than_cores_warns_when_ray_is_started_here(fake_ray_start):
    cfg = BackendConfig(name="ray", num_env_runners=64)
    with pytest.warns(UserWarning, match=r"backend.num_env_runners: 64 env runners on a "
                                         r"machine with 4 CPU cores"):
        ray_backend.connect(cfg, at_least=64, runners=64)
    assert fake_ray_start[0]["num_cpus"] == 64
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ray_backend.connect(BackendConfig(name="ray", num_env_runners=4), at_least=4, runners=4)

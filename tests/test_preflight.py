"""Bad env kwargs, broken env modules and impossible target metrics stop a run before any work."""

from __future__ import annotations

import textwrap

import pytest

from interplay.config.validation import validate
from interplay.envs.registry import EnvSpecError, env_factory, register_env
from interplay.envs.toy import ShiftingCrowd
from interplay.errors import ConfigError
from interplay.experiment.loop import train
from interplay.run.callbacks import Callbacks


def wrapped_crowd(**kwargs):
    """A factory that takes ``**kwargs`` and passes them on, as PettingZoo's modules do."""
    return ShiftingCrowd(**kwargs)


def needs_size(size, *, scale=0.1):
    return ShiftingCrowd(max_steps=size, scale=scale)


def _run(tmp_path, **sections):
    data = {"train": {"steps": 40, "seed": 0}, "log": {"console": False, "tensorboard": False,
                                                      "curve": False}}
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    return train(validate(data), tmp_path / "run")


@pytest.mark.parametrize(("env_id", "kwargs", "needles"), [
    (f"{__name__}:needs_size", {"size": 3, "sise": 4},
     ["env.kwargs.sise: not accepted", "size, scale"]),
    (f"{__name__}:needs_size", {"scale": 1.0},
     ["env.kwargs.size: required by the env's constructor"]),
    (f"{__name__}:wrapped_crowd", {"max_step": 3},
     ["env.kwargs.max_step: not accepted", "schedule, max_steps, scale"]),
    ("mpe2.simple_spread_v3", {"N": 2, "max_cycle": 5},
     ["env.kwargs.max_cycle: not accepted", "max_cycles"]),
    ("spread", {"n": 2}, ["env.kwargs", "'n'", "N, local_ratio"]),
])
def test_unknown_env_kwargs_are_named_before_work(tmp_path, env_id, kwargs, needles):
    with pytest.raises(EnvSpecError) as info:
        _run(tmp_path, env={"id": env_id, "kwargs": kwargs})
    for needle in needles:
        assert needle in str(info.value)
    assert not (tmp_path / "run").exists()


def test_unknown_kwargs_of_a_registered_env_in_async_workers_are_named(tmp_path):
    with pytest.raises(EnvSpecError, match="env.kwargs.colour: not accepted.*max_steps"):
        _run(tmp_path, env={"id": f"{__name__}:wrapped_crowd", "kwargs": {"colour": 1},
                            "vectorization": "async", "num_workers": 1})


def test_a_type_error_inside_the_env_is_not_blamed_on_kwargs():
    def broken(**kwargs):
        raise TypeError("unsupported operand type(s) for +: 'int' and 'str'")

    register_env("broken_inside", broken)
    with pytest.raises(EnvSpecError, match="with x=1 raised TypeError: unsupported operand") as info:
        env_factory("broken_inside", {"x": 1})()
    assert "not accepted" not in str(info.value)


@pytest.mark.parametrize(("kwargs", "raised"), [
    ({"N": "two"}, "with N='two' raised TypeError: 'str' object cannot be interpreted as an integer"),
    ({"N": -2}, "with N=-2 raised ValueError"),
])
def test_env_kwargs_the_env_constructor_rejects_are_named_before_work(tmp_path, kwargs, raised):
    with pytest.raises(EnvSpecError) as info:
        _run(tmp_path, env={"id": "mpe2.simple_spread_v3", "kwargs": kwargs})
    assert "env: building mpe2.simple_spread_v3.parallel_env " + raised in str(info.value)
    assert not (tmp_path / "run").exists()


def test_an_env_that_fails_only_when_rebuilt_is_not_a_settings_error():
    calls = []

    def second_build_fails(**kwargs):
        calls.append(1)
        if len(calls) > 1:
            raise OSError("device busy")
        return ShiftingCrowd()

    make = env_factory(second_build_fails, {})
    make()
    with pytest.raises(OSError, match="device busy"):
        make()


@pytest.mark.parametrize(("body", "raised"), [
    ("raise RuntimeError('no licence server')", "RuntimeError: no licence server"),
    ("x = 1 / 0", "ZeroDivisionError: division by zero"),
    ("import sys\nsys.exit(3)", "SystemExit: 3"),
])
def test_an_env_module_that_raises_on_import_is_named(tmp_path, monkeypatch, body, raised):
    (tmp_path / "badenvmod.py").write_text(textwrap.dedent(body) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "badenvmod", raising=False)
    for env_id in ("badenvmod", "badenvmod:env"):
        with pytest.raises(EnvSpecError) as info:
            env_factory(env_id)
        assert f"importing module 'badenvmod' raised {raised}" in str(info.value)


@pytest.mark.parametrize(("metric", "needles"), [
    ("episode_reward_mean", ["train.target_metric 'episode_reward_mean'", "'episode_return_mean'"]),
    ("policy_return_mean/agnt", ["'policy_return_mean/agent'"]),
    ("agent_return_mean/agent_7", ["agent_return_mean/<agent> for agents agent_0, agent_1, agent_2"]),
    ("goals", ["custom/", "a callback's `metrics`"]),
])
@pytest.mark.parametrize("target", [{"test_frequency": 20, "target": 1.0}, {}])
def test_a_target_metric_no_test_phase_reports_is_named_before_work(tmp_path, metric, needles,
                                                                    target):
    with pytest.raises(ConfigError) as info:
        _run(tmp_path, train={**target, "target_metric": metric})
    for needle in needles:
        assert needle in str(info.value)
    assert not (tmp_path / "run").exists()


class Goals(Callbacks):
    metrics = ("goals", "queues/")

    def on_episode_end(self, *, episode, env_index, runner):
        episode.add_metric("goals", 1.0)
        episode.add_metric("custom/shots", 2.0)


@pytest.mark.parametrize(("metric", "stops"), [
    ("policy_return_mean/agent", False),
    ("goals", True),
    ("queues/north", False),  # declared but never reported: never reached, no error
    ("custom/shots", True),
])
def test_declared_and_custom_metrics_may_be_targets(tmp_path, metric, stops):
    result = _run(tmp_path, env={"kwargs": {"max_cycles": 5}},
                  train={"test_frequency": 20, "test_episodes": 1, "target": 0.5,
                         "target_metric": metric, "callbacks": [f"{__name__}:Goals"]})
    assert result.stopped_early is stops


def test_a_policy_module_that_raises_on_import_is_named(tmp_path, monkeypatch):
    (tmp_path / "badpolicymod.py").write_text("raise KeyError('weights')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"policies.p.fn: importing module 'badpolicymod' raised "
                                          r"KeyError: 'weights'"):
        _run(tmp_path, policies={"p": {"agents": ["agent_*"], "type": "scripted",
                                       "fn": "badpolicymod:act"}})


@pytest.mark.parametrize(("env_id", "needle"), [
    ("mpe2.simple_sprad_v3", "package 'mpe2' is installed but has no module 'simple_sprad_v3'; "
                             "did you mean 'mpe2.simple_spread_v3'"),
    ("pettingzoo.classic.tictactoe_v9", "did you mean 'pettingzoo.classic.tictactoe_v3'"),
    ("pettingzoo.classic.zzz", "package 'pettingzoo.classic' is installed but has no module 'zzz')"),
])
def test_a_typo_in_an_installed_env_package_is_named_not_blamed_on_the_install(tmp_path, env_id,
                                                                               needle):
    with pytest.raises(EnvSpecError) as info:
        _run(tmp_path, env={"id": env_id})
    assert needle in str(info.value) and "pip install" not in str(info.value)
    assert not (tmp_path / "run").exists()

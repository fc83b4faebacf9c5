"""The off-policy algorithms over their shared base, capabilities declared on each class, and
joint replay rows placed by their (step, copy) cell."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import numpy as np
import pytest
from test_replay import joint_buffer, rows

import interplay
import interplay.algos
from interplay import docs
from interplay.algos import REGISTRY
from interplay.algos.base import CAPABILITIES, Algorithm
from interplay.algos.offpolicy import OffPolicy, ReplaySettings
from interplay.config.algo import settings_for
from interplay.envs.registry import known_env_names, native_env_class

ROOT = Path(__file__).resolve().parent.parent
QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


def test_each_algorithm_keeps_its_own_replay_defaults():
    want = {  # batch_size, buffer_size, learning_starts, train_every, gamma, tau
        "dqn": (64, 100_000, 1_000, 1, 0.99, 1.0),
        "vdn": (128, 50_000, 2_000, 8, 0.99, 1.0),
        "qmix": (128, 50_000, 2_000, 8, 0.99, 1.0),
        "maddpg": (1024, 200_000, 100, 1, 0.95, 0.01),
        "matd3": (1024, 200_000, 100, 1, 0.95, 0.01),
        "isac": (256, 200_000, 1_000, 1, 0.99, 0.005),
        "masac": (256, 200_000, 1_000, 1, 0.99, 0.005),
    }
    for name, values in want.items():
        s = settings_for({"name": name})
        assert isinstance(s, ReplaySettings) and issubclass(REGISTRY[name], OffPolicy), name
        got = (s.batch_size, s.buffer_size, s.learning_starts, s.train_every, s.gamma, s.tau)
        assert got == values, name
    with pytest.raises(Exception, match="batch_size"):
        settings_for({"name": "maddpg", "batch_size": 0})  # bounds declared once, kept


def test_every_algorithm_declares_every_capability_on_its_class():
    for name, cls in REGISTRY.items():
        assert issubclass(cls, Algorithm)
        assert cls.action_kinds <= {"discrete", "multi_discrete", "box", "composite"}, name
        for flag in CAPABILITIES[1:]:
            assert isinstance(getattr(cls, flag), bool), (name, flag)
    assert not REGISTRY["maddpg"].agents_come_and_go and REGISTRY["qmix"].agents_come_and_go
    assert REGISTRY["mappo"].centralised and not REGISTRY["ippo"].centralised
    assert REGISTRY["ippo"].supports_recurrent and not REGISTRY["maddpg"].supports_recurrent


def test_the_readme_table_is_the_one_the_classes_generate():
    text = (ROOT / "README.md").read_text()
    assert docs.TABLE_START in text and docs.with_table(text) == text, (
        f"README.md's table of algorithms is out of date: run {docs.COMMAND}")
    for name, cls in REGISTRY.items():
        shipped = cls.__module__.startswith("interplay.")
        assert (f"| `{name}` |" in docs.algorithm_table()) == shipped, name


def test_a_recurrent_model_is_refused_by_what_the_algorithm_class_declares():
    with pytest.raises(interplay.ConfigError, match="algo.model.recurrent: maddpg does not"):
        interplay.load_config([], ["algo.name=maddpg", "algo.model.recurrent=gru", *QUIET])
    cfg = interplay.load_config([], ["algo.name=ippo", "algo.model.recurrent=gru", *QUIET])
    assert cfg.algo.model.recurrent == "gru"


def _matched(batches):
    """Joint rows as sorting and searching made them: the reference for the cell placement."""
    filled = [t for t in batches.values() if len(t)]
    width = max(int(t.env.max()) + 1 for t in filled)
    keys = np.unique(np.concatenate([t.step * width + t.env for t in filled]))
    return keys % width, {name: np.searchsorted(keys, t.step * width + t.env)
                          for name, t in batches.items()}


def test_joint_rows_sit_where_sorting_and_searching_put_them():
    rng = np.random.default_rng(3)
    for _ in range(20):  # random steps, copies and absent agents, handed over in any order
        n = int(rng.integers(1, 12))
        cells = rng.choice(40, size=n, replace=False)  # distinct (step, copy) cells per slot
        step, env = 5 + cells // 8, cells % 8
        a = rows(rng.random(n), rng.random(n), rng.random(n), env=env, step=step,
                 slot=np.zeros(n, np.int64))
        m = int(rng.integers(1, 6))
        other = rng.choice(40, size=m, replace=False)
        b = rows(rng.random(m), rng.random(m), rng.random(m), env=other % 8, step=5 + other // 8)
        copies, joined = joint_buffer().join({"a": a, "b": b})
        want_copies, where = _matched({"a": a, "b": b})
        np.testing.assert_array_equal(copies, want_copies)
        np.testing.assert_array_equal(joined["a"]["obs"][where["a"], 0, 0], a.obs[:, 0])
        np.testing.assert_array_equal(joined["b"]["reward"][where["b"], 0], b.reward)
        assert joined["a"]["present"].sum() == n and joined["b"]["present"].sum() == m


def test_an_empty_join_gives_no_rows():
    copies, joined = joint_buffer().join({"a": rows([], [], [])})
    assert len(copies) == 0 and joined["a"]["obs"].shape[0] == 0


def test_every_named_algorithm_and_native_env_in_the_package_registered_itself():
    for info in pkgutil.iter_modules(interplay.algos.__path__):
        module = importlib.import_module(f"interplay.algos.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Algorithm) \
                    and isinstance(vars(obj).get("name"), str):
                assert REGISTRY[obj.name] is obj, obj
    from interplay.envs.native import SpeakerListener, Spread
    assert native_env_class("spread") is Spread
    assert native_env_class("speaker_listener") is SpeakerListener
    assert {"spread", "speaker_listener"} <= set(known_env_names())

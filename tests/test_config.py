"""Config: merging, overrides, and errors that name the key."""

from __future__ import annotations

import pytest

from interplay.config import ConfigError, load


def test_files_merge_in_order_and_overrides_come_last(tmp_path):
    (tmp_path / "base.yaml").write_text("train: {steps: 100, seed: 3}\nenv: {num_envs: 2}\n")
    (tmp_path / "algo.yaml").write_text("train: {steps: 200}\nalgo: {name: random}\n")
    cfg = load([tmp_path / "base.yaml", tmp_path / "algo.yaml"], ["train.seed=9", "env.kwargs.N=4"])
    assert cfg.train.steps == 200 and cfg.train.seed == 9 and cfg.env.num_envs == 2
    assert cfg.env.kwargs == {"N": 4}


@pytest.mark.parametrize(("override", "needles"), [
    ("train.stepz=5", ["train.stepz", "did you mean train.steps"]),
    ("train.steps=abc", ["train.steps", "integer", "'abc'"]),
    ("train.steps=-5", ["train.steps", "-5"]),
    ("train.steps=0", ["steps must be positive"]),
    ("env.num_envs=0", ["env.num_envs"]),
    ("policies.p.stack_size=0", ["policies.p.stack_size"]),
    ("policies.p.type=scripted", ["scripted policy needs fn"]),
    ("log.evry=3", ["log.evry", "did you mean log.every"]),
    ("trian.steps=3", ["trian", "did you mean train"]),
])
def test_bad_values_name_the_key(override, needles):
    with pytest.raises(ConfigError) as info:
        load([], [override])
    for needle in needles:
        assert needle in str(info.value)


def test_python_tags_are_refused(tmp_path):
    evil = tmp_path / "evil.yaml"
    marker = tmp_path / "ran"
    evil.write_text(f"train: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(ConfigError, match="evil.yaml"):
        load([evil])
    assert not marker.exists()


def test_missing_file_and_bad_override_syntax():
    with pytest.raises(ConfigError, match="does not exist"):
        load(["nowhere.yaml"])
    with pytest.raises(ConfigError, match="dotted.key=value"):
        load([], ["train.steps"])


def test_scientific_notation_reads_as_numbers(tmp_path):
    (tmp_path / "c.yaml").write_text("train: {steps: 2e4}\n")
    cfg = load([tmp_path / "c.yaml"], ["train.seed=1e1"])
    assert cfg.train.steps == 20000 and cfg.train.seed == 10

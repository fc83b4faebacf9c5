"""Config: merging, overrides, and errors that name the key."""

from __future__ import annotations

import pytest

from interplay.config.schema import ConfigError, load


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


@pytest.mark.parametrize(("override", "needle"), [
    ("env.num_env=2", "env.num_env: unknown key; did you mean env.num_envs?"),
    ("policies.agent.stack=2", "policies.agent.stack: unknown key; did you mean policies.agent.stack_size?"),
    ("checkpoint.evry=5", "checkpoint.evry: unknown key; did you mean checkpoint.every?"),
    ("log.tensorbord=false", "log.tensorbord: unknown key; did you mean log.tensorboard?"),
    ("train.test_frequncy=5", "train.test_frequncy: unknown key; did you mean train.test_frequency?"),
])
def test_a_typo_in_each_section_names_the_nearest_key(override, needle):
    with pytest.raises(ConfigError) as info:
        load([], [override])
    assert needle in str(info.value)


def test_algorithm_settings_are_checked_before_work(tmp_path, capsys):
    from interplay.cli import main

    code = main(["train", "-s", "algo.lrr=3", "--run-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "algo.lrr: unknown key" in err
    assert not (tmp_path / "r").exists()

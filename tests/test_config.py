"""Config: merging, overrides, and errors that name the key."""

from __future__ import annotations

import pytest

from interplay.config.loading import load
from interplay.errors import ConfigError


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


def _laughs(levels: int, width: int) -> str:
    lines = ["env:", "  kwargs:", "    l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"    l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("text", "line", "needle"), [
    (_laughs(9, 9), 8, "expands to more than"),  # 9**6 values at l5, line 8
    (_laughs(30, 2), 18, "expands to more than"),  # about 2**17 values at l15, line 18
    ("algo:\n  x: &a 1\n  y: [" + ", ".join(["*a"] * 101) + "]\n", 3, "more than 100 aliases"),
    ("env:\n  kwargs: &k\n    self: *k\n", 3, "inside the value it names"),
])
def test_alias_bombs_are_refused_naming_file_and_line(tmp_path, text, line, needle):
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load([path])
    assert f"bomb.yaml, line {line}: " in str(info.value) and needle in str(info.value)


def test_an_alias_bomb_in_an_override_is_refused():
    bomb = "[" + ", ".join(["&a [1, 2, 3]"] + ["*a"] * 120) + "]"
    with pytest.raises(ConfigError, match="override .*more than 100 aliases"):
        load([], [f"env.kwargs.x={bomb}"])


def test_a_few_aliases_and_merge_keys_still_work(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("env:\n  kwargs: &k {N: 3, local_ratio: 0.5}\n"
                    "algo:\n  name: ippo\n  model: &n {hidden: [8, 8], activation: relu}\n"
                    "policies:\n  p: {model: {<<: *n, hidden: [4]}}\n  q: {model: *n}\n")
    cfg = load([path])
    assert cfg.env.kwargs == {"N": 3, "local_ratio": 0.5}
    assert cfg.policies["p"].model == {"hidden": [4], "activation": "relu"}
    assert cfg.policies["q"].model == {"hidden": [8, 8], "activation": "relu"}


@pytest.mark.parametrize(("text", "needle"), [
    ("train:\n  steps: 5\n  seed: 1\n  steps: 6\n", "line 4: duplicate key 'train.steps' (first at line 2)"),
    ("train: {seed: 1}\nlog: {every: 5}\ntrain: {steps: 6}\n", "line 3: duplicate key 'train' (first at line 1)"),
    ("env:\n  kwargs:\n    1: a\n    0x1: b\n", "line 4: duplicate key 'env.kwargs.0x1'"),
    ("policies:\n  p: {agents: [a, b], agents: [c]}\n", "line 2: duplicate key 'policies.p.agents'"),
])
def test_duplicate_keys_are_refused_naming_file_line_and_key(tmp_path, text, needle):
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load([path])
    assert f"dup.yaml, {needle}" in str(info.value)


def test_duplicate_keys_in_an_override_are_refused():
    with pytest.raises(ConfigError, match=r"override .*duplicate key 'N'"):
        load([], ["env.kwargs={N: 3, N: 4}"])


@pytest.mark.parametrize("data", [
    "train:\n  steps: 5\nenv:\n  kwargs: {name: caf\xe9}\n".encode("latin-1"),
    "train: {steps: 5}\n".encode("utf-16"),
])
def test_a_file_that_is_not_utf8_is_refused_naming_it(tmp_path, data):
    path = tmp_path / "enc.yaml"
    path.write_bytes(data)
    with pytest.raises(ConfigError, match=r"enc\.yaml, line \d+: not UTF-8"):
        load([path])


def test_a_utf8_file_with_a_byte_order_mark_loads(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes("train: {steps: 7}\n".encode("utf-8-sig"))
    assert load([path]).train.steps == 7

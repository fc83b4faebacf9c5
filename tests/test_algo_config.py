"""The ``algo`` section is typed by the chosen algorithm: settings, defaults, docs, capabilities."""

from __future__ import annotations

import json

import pytest

from interplay import ConfigError, config, train
from interplay.cli import main
from interplay.config.algo import SETTINGS

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_every_setting_of_the_chosen_algorithm_is_shown_with_default_and_doc(name):
    cfg = config.load([], [f"algo.name={name}"])
    text = config.describe(cfg)
    algo_lines = [line for line in
                  text.split("algo:\n", 1)[1].split("\npolicies:", 1)[0].splitlines()
                  if not line.startswith("    ")]  # the fields of a nested model (algo.model)
    fields = type(cfg.algo).model_fields
    assert [line.split(":", 1)[0].strip() for line in algo_lines] == list(fields)
    for line, (key, field) in zip(algo_lines, fields.items(), strict=True):
        assert field.description, f"{name}: algo.{key} has no doc"
        nested = line.rstrip().endswith(":") or ":  #" in line.split(key, 1)[1][:4]
        assert "(default: " in line or nested
        assert " ".join(field.description.split())[:30] in line


@pytest.mark.parametrize("name,key,near", [
    ("ippo", "lrr", "lr"), ("dqn", "epsilon_ends", "epsilon_end"),
    ("matd3", "policy_dely", "policy_delay"), ("mappo", "model.hiden", "model.hidden"),
])
def test_an_unknown_algorithm_setting_is_refused_when_the_config_is_read(name, key, near):
    with pytest.raises(ConfigError, match=rf"algo\.{key}: unknown key") as err:
        config.load([], [f"algo.name={name}", f"algo.{key}=1"])
    if near:
        assert f"did you mean algo.{near}?" in str(err.value)


def test_a_setting_of_another_algorithm_is_refused_naming_the_chosen_one():
    with pytest.raises(ConfigError, match=r"algo\.epsilon_end: unknown key"):
        config.load([], ["algo.name=ippo", "algo.epsilon_end=0.1"])
    with pytest.raises(ConfigError, match=r"algo\.lr: .*greater than 0"):
        config.load([], ["algo.name=dqn", "algo.lr=-1"])


def test_an_unknown_algorithm_name_names_the_nearest():
    with pytest.raises(ConfigError, match=r"unknown algorithm 'mapo'; did you mean 'mappo'"):
        config.load([], ["algo.name=mapo"])
    with pytest.raises(ConfigError, match=r"algo.name: cannot import 'no_such_module'"):
        config.load([], ["algo.name=no_such_module:Algo"])
    with pytest.raises(ConfigError, match=r"no Settings class"):
        config.load([], ["algo.name=json:dumps"])


@pytest.mark.parametrize("algo", ["maddpg", "matd3"])
def test_maddpg_on_a_turn_based_env_is_refused_before_any_step(algo, tmp_path):
    cfg = config.load([], ["env.id=pettingzoo.classic.tictactoe_v3", f"algo.name={algo}",
                           "train.steps=100", *QUIET])
    with pytest.raises(ConfigError, match=rf"{algo} cannot learn from env "
                                          r"'pettingzoo.classic.tictactoe_v3': it is turn-based"):
        train(cfg, tmp_path)
    assert not (tmp_path / "metrics.jsonl").exists() or not (tmp_path / "metrics.jsonl").read_text()


def test_an_algorithm_of_ones_own_trains_resumes_and_evaluates_from_the_cli(tmp_path):
    run_dir = tmp_path / "run"
    sets = ["algo.name=custom_algo:Greedy", "algo.action=1", "train.steps=60",
            "env.id=pettingzoo.classic.rps_v2", "log.every=20", *QUIET]
    argv = [word for s in sets for word in ("-s", s)]
    assert main(["train", *argv, "--run-dir", str(run_dir)]) == 0
    saved = (run_dir / "config.yaml").read_text()
    assert "name: custom_algo:Greedy" in saved and "action: 1" in saved
    assert main(["resume", str(run_dir), "-s", "train.steps=120"]) == 2  # names outside code
    assert main(["resume", str(run_dir), "-s", "train.steps=120", "--trust"]) == 0
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["env_steps"] >= 120
    assert main(["eval", str(run_dir), "--episodes", "3", "--trust"]) == 0

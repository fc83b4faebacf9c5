"""The generated docs match the code: config reference, metrics glossary, command line.

``python -m interplay.docs`` writes docs/reference.md, docs/metrics.md and docs/cli.md from
the config models, the metric tables next to the code that reports them, and the argument
parser; these tests regenerate them and fail when the committed pages differ, when an option
has no help, or when a run writes a metric name the glossary does not explain.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from pydantic import BaseModel

from interplay import docs
from interplay.algos import REGISTRY
from interplay.cli import _parser
from interplay.config.algo import SETTINGS
from interplay.config.loading import load
from interplay.config.schema import Config
from interplay.experiment.evaluate import EVAL_DOCS, evaluate
from interplay.experiment.loop import train
from interplay.experiment.versus import VERSUS_DOCS
from interplay.run.episodes import Window

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false",
         "checkpoint.at_end=true"]


def test_committed_pages_are_what_the_code_generates(tmp_path):
    docs.write(tmp_path)
    for name in docs.PAGES:
        fresh = (tmp_path / name).read_text()
        committed = DOCS / name
        assert committed.is_file() and committed.read_text() == fresh, (
            f"docs/{name} is out of date: run {docs.COMMAND} to update")


def test_check_names_a_stale_page_and_the_command(tmp_path, capsys):
    docs.write(tmp_path)
    assert docs.main(["--out", str(tmp_path), "--check"]) == 0
    page = tmp_path / "reference.md"
    page.write_text(page.read_text().replace("`train.steps`", "`train.stepz`"))
    (tmp_path / "cli.md").unlink()
    assert docs.main(["--out", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    assert f"{page} is out of date: run {docs.COMMAND} to update" in err
    assert "cli.md is out of date" in err and "metrics.md" not in err


# -- config reference ------------------------------------------------------------------------
def _keys(model: type[BaseModel], prefix: str) -> list[str]:
    out = []
    for key, field in model.model_fields.items():
        out.append(f"{prefix}.{key}")
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            out += _keys(field.annotation, f"{prefix}.{key}")
    return out


def test_reference_lists_every_section_key_and_algorithm_setting():
    text = docs.reference_md()
    for section, field in Config.model_fields.items():
        assert f"## {section}\n" in text
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel) \
                and section != "algo":
            for key in _keys(field.annotation, section):
                assert f"| `{key}` |" in text, key
    for name, settings in SETTINGS.items():
        part = text.split(f"### algo: {name}\n", 1)[1].split("\n## ", 1)[0].split("\n### ")[0]
        assert f"| `algo.name` | str | `{name}` |" in part
        for key in _keys(settings, "algo"):
            assert f"| `{key}` |" in part, (name, key)
    assert "| `policies.<policy>.agents` |" in text


def test_reference_shows_type_bounds_default_and_doc():
    text = docs.reference_md()
    assert ("| `env.num_envs` | int (≥ 1, ≤ 2,147,483,647) | `1` | Env copies stepped together; each policy acts "
            "once per step for all of them. |") in text
    assert "| `env.api` | one of `auto`, `aec`, `parallel` | `auto` |" in text
    assert ("| `train.max_steps_per_episode` | int or null (≥ 1, ≤ 1,000,000,000,000,000) | `null` |"
            in text)
    assert "| `algo.model.recurrent` | one of `none`, `gru`, `lstm` | `none` |" in text


def test_reference_names_each_setting_as_a_config_writes_it():
    """A setting with an alias is listed under the name YAML uses and ``config --show`` prints."""
    text = docs.reference_md()
    assert "| `policies.<policy>.from` |" in text and "<policy>.source`" not in text
    shown = load([], ["policies.old.type=frozen", "policies.old.from=runs/x"]).model_dump(
        mode="json", by_alias=True)["policies"]["old"]
    for key in shown:
        assert f"| `policies.<policy>.{key}` |" in text, key


# -- command line -----------------------------------------------------------------------------
def _commands() -> dict[str, argparse.ArgumentParser]:
    return docs._subcommands(_parser())


def test_every_command_and_option_has_help():
    parser = _parser()
    assert parser.description
    missing = [f"interplay {name} {a.option_strings or a.dest}"
               for name, sub in _commands().items()
               for a in docs._documented_actions(sub) if not (a.help or "").strip()]
    assert not missing, f"options without help text: {missing}"
    assert all(sub.description for sub in _commands().values())


def test_every_option_that_may_be_given_again_says_so():
    quiet = [f"interplay {name} {a.option_strings[0]}" for name, sub in _commands().items()
             for a in docs._documented_actions(sub)
             if isinstance(a, argparse._AppendAction) and "(repeatable)" not in (a.help or "")]
    assert not quiet, f"options that take several values without saying so: {quiet}"


def test_every_command_and_option_is_in_the_cli_page():
    text = (DOCS / "cli.md").read_text()
    for name, sub in _commands().items():
        assert f"## interplay {name}\n" in text
        section = text.split(f"## interplay {name}\n", 1)[1].split("\n## ", 1)[0]
        for action in docs._documented_actions(sub):
            for flag in action.option_strings or [action.dest]:
                assert f"`{flag}" in section, f"interplay {name}: {flag} is not in docs/cli.md"


# -- metrics glossary -------------------------------------------------------------------------
def test_undocumented_finds_names_no_pattern_covers():
    keys = ["env_steps", "policy_loss/agent", "agent_return_mean/player_1", "mystery",
            "mystery/agent", "policy_loss"]
    assert docs.undocumented(keys) == ["mystery", "mystery/agent", "policy_loss"]


def test_every_algorithm_documents_its_learner_metrics():
    assert docs.learner_docs().keys() == REGISTRY.keys()
    text = docs.metrics_md()
    for name, metrics in docs.learner_docs().items():
        assert f"### {name}\n" in text
        for key in metrics:
            assert f"`{key}`" in text


# Settings that make each algorithm learn within a few hundred env steps, where it has them.
QUICK = {"rollout": 16, "epochs": 1, "minibatches": 1, "learning_starts": 32,
         "batch_size": 16, "buffer_size": 2000, "train_every": 4}


@pytest.mark.parametrize("algo", sorted(REGISTRY))
def test_every_metric_a_run_writes_is_in_the_glossary(algo, tmp_path):
    quick = {k: v for k, v in QUICK.items() if k in SETTINGS[algo].model_fields}
    cfg = load([], ["env.id=mpe2.simple_spread_v3", "env.num_envs=2", f"algo.name={algo}",
                    "train.steps=400",
                    "train.test_frequency=200", "train.test_episodes=2", "log.every=100", *QUIET,
                    *(f"algo.{k}={v}" for k, v in quick.items())])
    result = train(cfg, tmp_path / "run")
    keys = {k for row in result.rows for k in row}
    assert {"phase", "env_steps", "episode_return_mean", "env_failures"} <= keys
    if REGISTRY[algo].metric_docs:  # it learned within the run: its metrics are there to check
        assert keys & set(_learner_names(result.rows, algo)), f"{algo} never updated"
    assert docs.undocumented(sorted(keys)) == [], (
        f"{algo}: metrics.jsonl names not in the glossary; declare them next to the code "
        f"that reports them (e.g. {REGISTRY[algo].__name__}.metric_docs) and run {docs.COMMAND}")
    report = evaluate(tmp_path / "run", episodes=2)
    patterns = [*EVAL_DOCS, *Window.metric_docs]
    assert docs.undocumented(report, patterns) == []


def _learner_names(rows: list[dict], algo: str) -> list[str]:
    patterns = list(REGISTRY[algo].metric_docs)
    return [k for row in rows for k in row if not docs.undocumented([k], patterns)]


def test_every_name_eval_vs_writes_is_in_the_glossary(tmp_path):
    run = tmp_path / "run"
    train(load([], ["env.id=duel_envs:first_to_claim", "env.kwargs.rounds=3", "env.num_envs=2",
                    "algo.name=random", "train.steps=50", *QUIET]), run)
    report = evaluate(run, vs="random", episodes=4)
    assert "win_rate" in report
    assert docs.undocumented(report, [*EVAL_DOCS, *VERSUS_DOCS]) == []


def test_every_name_a_league_run_writes_is_in_the_glossary(tmp_path):
    result = train(load([], ["env.id=pettingzoo.classic.tictactoe_v3", "env.num_envs=2",
                             "algo.name=dqn", "algo.learning_starts=50", "train.self_play=true",
                             "train.steps=300", "train.test_frequency=-1", "log.every=100",
                             "league.snapshot_every=100", "league.fixed=[random]", *QUIET]),
                   tmp_path / "run")
    keys = {k for row in result.rows for k in row}
    assert {"rating/learner", "rating/random"} <= keys and any("snapshot" in k for k in keys)
    assert docs.undocumented(sorted(keys)) == []


def test_every_name_a_run_of_several_learners_writes_is_in_the_glossary(tmp_path):
    result = train(load([], ["env.id=mpe2.simple_tag_v3", "env.num_envs=2", "algo.name=ippo",
                             "algo.rollout=16", "policies.adversary.agents=null",
                             "policies.agent.algo={name: dqn, learning_starts: 32}",
                             "train.steps=200", "train.test_frequency=-1", "log.every=100",
                             *QUIET]), tmp_path / "run")
    keys = {k for row in result.rows for k in row}
    assert {"lr/adversary", "epsilon/agent"} <= keys
    assert docs.undocumented(sorted(keys)) == []

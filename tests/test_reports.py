"""What a report row says: learner metrics over its window, throughput, and the console."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from helpers import read_metrics

from interplay.config.loading import load
from interplay.experiment import loop
from interplay.experiment.loop import Experiment, resume, train
from interplay.experiment.update_means import UpdateMeans

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


def counting_updates(exp):
    """Make ``exp``'s updates report their own number (``n``), and every third ``rare``."""
    done = []
    update = exp.algo.update

    def counted(storage):
        metrics = update(storage)
        done.append(exp.runner.env_steps)
        n = len(done)
        return {**metrics, "n": float(n), **({"rare": 10.0 * n} if n % 3 == 0 else {})}

    exp.algo.update = counted
    return done


def test_learner_metrics_are_the_mean_over_every_update_of_the_window(tmp_path):
    # IPPO on 2 copies learns every 16 env steps; a report every 24 covers one or two updates,
    # and "rare" comes from every third update only.
    cfg = load([], ["env.num_envs=2", "algo.name=ippo", "algo.rollout=8", "train.steps=200",
                    "log.every=24", *QUIET])
    exp = Experiment(cfg, tmp_path)
    try:
        done = counting_updates(exp)
        rows = exp.run().rows
    finally:
        exp.close()
    saved = read_metrics(tmp_path)
    assert [r["env_steps"] for r in saved] == [r["env_steps"] for r in rows]
    first = next(i for i, r in enumerate(rows) if "n" in r)
    assert rows[first]["env_steps"] >= done[0] and all("n" not in r for r in rows[:first])
    learner_keys = {f"{name}/agent" for name in ("policy_loss", "value_loss", "entropy")}
    previous = 0
    for row, line in zip(rows[first:], saved[first:], strict=True):
        numbers = [i + 1 for i, s in enumerate(done) if previous < s <= row["env_steps"]]
        previous = row["env_steps"]
        assert "n" in row  # once reported, always there
        assert row["n"] == (sum(numbers) / len(numbers) if numbers else None)
        assert ("rare" in row) == (sum(s <= row["env_steps"] for s in done) >= 3)
        rare = [10.0 * n for n in numbers if n % 3 == 0]
        assert row.get("rare") == (sum(rare) / len(rare) if rare else None)
        assert line["n"] == row["n"] and line.get("rare") == row.get("rare")  # null in the file
    losses = next(i for i, r in enumerate(rows) if learner_keys <= set(r))
    assert all(learner_keys <= set(r) for r in rows[losses:])
    assert any(r["n"] is None for r in rows[first:]), "some window had no update"
    assert any(len([s for s in done if a["env_steps"] < s <= b["env_steps"]]) == 2
               for a, b in zip(rows, rows[1:], strict=False)), "some window had two updates"


def test_a_resumed_run_averages_the_updates_made_before_its_checkpoint(tmp_path):
    # IPPO learns every 16 env steps; the checkpoint at step 160 (just after an update) falls
    # inside a report window (reports every 48 steps), whose mean must still cover that update.
    common = ["env.num_envs=2", "algo.name=ippo", "algo.rollout=8", "log.every=48",
              "train.seed=3", *QUIET]
    train(load([], [*common, "train.steps=320"]), tmp_path / "straight")
    train(load([], [*common, "train.steps=160"]), tmp_path / "split")
    resume(tmp_path / "split", ["train.steps=320"])
    timing = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}

    def numbers(run):
        return [{k: v for k, v in r.items() if k not in timing} for r in read_metrics(run)]

    straight, split = numbers(tmp_path / "straight"), numbers(tmp_path / "split")
    assert [r["env_steps"] for r in split] == [48, 96, 144, 192, 240, 288, 320]
    assert "policy_loss/agent" in split[3] and split == straight


def test_gauges_give_their_value_at_the_last_update_of_the_window():
    means = UpdateMeans(gauges={"buffer_size", "epsilon"})
    means.add({"loss/p": 1.0, "buffer_size/p": 10.0, "epsilon": 0.9})
    means.add({"loss/p": 3.0, "buffer_size/p": 20.0, "epsilon": 0.8})
    assert means.take() == {"loss/p": 2.0, "buffer_size/p": 20.0, "epsilon": 0.8}
    assert means.take() == {"loss/p": None, "buffer_size/p": None, "epsilon": None}


def test_the_default_report_interval_grows_with_the_copies(tmp_path):
    assert load([], []).log.every is None
    assert [load([], []).log.every_for(n) for n in (1, 8, 64, 1024)] == [2000, 2000, 16000, 256000]
    assert load([], ["log.every=500"]).log.every_for(1024) == 500
    result = train(load([], ["env.num_envs=64", "train.steps=40000", *QUIET]), tmp_path)
    assert [r["env_steps"] for r in result.rows] == [16000, 32000, 40000]
    assert [r["env_steps"] for r in read_metrics(tmp_path)] == [16000, 32000, 40000]


def test_the_closing_rows_rate_covers_the_window_before_it_too(tmp_path, monkeypatch):
    # A clock that runs 1 ms per env step, with a 10 s stall just before the end: the short
    # closing window alone would report a few steps over 10 s.
    cfg = load([], ["env.num_envs=4", "train.steps=1000", "log.every=300", *QUIET])
    exp = Experiment(cfg, tmp_path)

    def clock():
        steps = exp.runner.env_steps
        return steps / 1000 + (10.0 if steps >= 1000 else 0.0)

    monkeypatch.setattr(loop, "time", SimpleNamespace(perf_counter=clock))
    try:
        rows = exp.run().rows
    finally:
        exp.close()
    assert [r["env_steps"] for r in rows] == [300, 600, 900, 1000]
    assert [r["env_steps_per_s"] for r in rows[:3]] == [1000.0, 1000.0, 1000.0]
    # The last row: steps 600..1000 over 0.4 s of stepping plus the stall.
    assert rows[-1]["env_steps_per_s"] == pytest.approx(400 / 10.4, abs=0.1)
    assert rows[-1]["run_env_steps_per_s"] == pytest.approx(1000 / 11.0, abs=0.1)
    assert rows[0]["run_env_steps_per_s"] == pytest.approx(1000.0)


def test_the_console_labels_the_episode_total_and_the_mean_per_agent():
    from rich.console import Console

    from interplay.loggers.console import ConsoleLogger

    out = io.StringIO()
    log = ConsoleLogger(1000, enabled=True, console=Console(file=out, width=200))
    row = {"phase": "train", "env_steps": 500, "env_steps_per_s": 10.0,
           "episode_return_mean": -9.0, "agent_return_mean/a_0": -2.0,
           "agent_return_mean/a_1": -4.0, "agent_return_mean/a_2": None,
           "policy_return_mean/a": -3.0}
    log.report(row)
    latest = log.progress.tasks[0].fields["latest"]
    log.summary(row, ["a"], ["a_0", "a_1", "a_2"])
    assert latest == "train return -9.00 (sum over agents), -3.00 mean per agent"
    table = out.getvalue()
    assert "episode return (sum over agents)" in table and "-9.000" in table
    assert "mean per agent" in table and table.count("-3.000") == 2  # policy a, and the mean

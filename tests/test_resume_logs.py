"""After a resume, metrics.jsonl and TensorBoard hold each step once, as a run that never stopped."""

from __future__ import annotations

from collections import Counter

import pytest
from helpers import read_metrics
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from interplay.config.loading import load
from interplay.experiment.loop import resume, train
from interplay.experiment.run_store.checkpoint import list_checkpoints

COMMON = ["env.id=spread", "env.num_envs=2", "log.console=false", "log.curve=false",
          "log.every=100", "train.test_frequency=200", "train.test_episodes=2"]


def tensorboard_steps(run) -> dict[str, list[int]]:
    acc = EventAccumulator(str(run / "tensorboard"))
    acc.Reload()
    return {tag: [e.step for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def rows_steps(run, phase: str) -> list[int]:
    return [r["env_steps"] for r in read_metrics(run) if r["phase"] == phase]


def assert_each_step_once(run, straight=None):
    tb = tensorboard_steps(run)
    for phase in ("train", "test"):
        steps = rows_steps(run, phase)
        assert steps == sorted(set(steps)), f"{phase} rows repeat a step: {steps}"
        assert tb[f"{phase}/episodes"] == steps
        if straight is not None:
            assert steps == rows_steps(straight, phase)
    for tag, steps in tb.items():
        assert not [s for s, n in Counter(steps).items() if n > 1], f"{tag}: {steps}"


@pytest.mark.parametrize(("first", "checkpoint_every", "resume_from", "to"), [
    (400, 200, -1, 600),     # from the last checkpoint, at a report and a test step
    (400, 200, 0, 600),      # from an older one: what came after it goes
    (250, 0, -1, 500),       # from the end of a run whose closing rows came after it
    (250, 0, -1, 250),       # with nothing left to do
    (400, 200, 0, 400),
])
def test_no_step_is_logged_twice_after_resume(tmp_path, first, checkpoint_every, resume_from, to):
    run = tmp_path / "run"
    train(load([], [*COMMON, f"train.steps={first}", f"checkpoint.every={checkpoint_every}"]), run)
    start = list_checkpoints(run)[resume_from]
    resume(run, [f"train.steps={to}"], checkpoint=start)
    straight = tmp_path / "straight"
    train(load([], [*COMMON, f"train.steps={to}"]), straight)
    assert_each_step_once(run, straight if to > int(start.name[5:]) else None)

"""What parts beside the loop reach through the experiment: an attachment wraps a policy's
actor with :meth:`Experiment.wrap_actor` instead of writing into the loop's actors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import tiny_cfg

from interplay.experiment import attach
from interplay.experiment.attach import register_attachment
from interplay.experiment.loop import train
from interplay.run.actors import ActBatch, Actor


class Counting:
    """Acts as the actor it wraps, counting its calls."""

    def __init__(self, inner: Actor):
        self.inner = inner
        self.squashed = inner.squashed
        self.wants_env_obs = inner.wants_env_obs
        self.calls = 0

    def act(self, batch: ActBatch, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        self.calls += 1
        return self.inner.act(batch, explore)


@pytest.fixture
def wrapped(monkeypatch):
    made: list = []

    def build(cfg, exp):
        pid = next(p for p, s in exp.specs.items() if s.trainable)
        made.append((exp, pid, exp.wrap_actor(pid, Counting)))
        return []

    monkeypatch.setattr(attach, "_BUILDERS", [])
    register_attachment(build)
    return made


def test_an_attachment_wraps_a_policys_actor_for_training_only(tmp_path, wrapped):
    train(tiny_cfg("env.id=spread", "env.num_envs=2", "algo.name=ippo", "algo.rollout=10",
                   "train.steps=20", "train.test_frequency=10", "train.test_episodes=1",
                   "env.kwargs={max_cycles: 5}"), tmp_path / "run")
    (exp, pid, actor), = wrapped
    assert isinstance(actor, Counting) and exp.actors[pid] is actor
    assert actor.calls == 10  # one call a step for every copy and agent of the policy
    assert exp.eval_actors[pid] is actor.inner  # test phases play the policy itself
    with pytest.raises(RuntimeError, match="only while the run is built"):
        exp.wrap_actor(pid, Counting)

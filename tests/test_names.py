"""What parts beside the loop reach through the experiment (an attachment wraps a policy's
actor with :meth:`Experiment.wrap_actor` instead of writing into the loop's actors), and the
facts an actor declares (an actor of one's own that leaves them out gets the defaults)."""

from __future__ import annotations

import numpy as np
import pytest
from custom_algo import Greedy
from helpers import read_metrics, tiny_cfg

from interplay import evaluate, load_policy
from interplay.experiment import attach
from interplay.experiment.attach import register_attachment
from interplay.experiment.loop import train
from interplay.run.actors import ActBatch, Actor, declared


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


class _Plain:
    """An actor of one's own that declares neither ``squashed`` nor ``wants_env_obs``."""

    def act(self, batch: ActBatch, explore: bool = True):
        return np.ones(len(batch.obs), np.int64), {}


class Plain(Greedy):
    """``custom_algo:Greedy`` with an actor that leaves the Actor protocol's facts out."""

    name = "plain"

    def actor(self, pid: str):
        return _Plain()


def test_an_actor_that_leaves_its_facts_out_gets_the_protocols_defaults():
    assert declared(_Plain(), "squashed") is False and declared(_Plain(), "wants_env_obs") is False
    assert Actor.squashed is False and Actor.wants_env_obs is False

    class Declares(Actor):
        squashed = True

        def act(self, batch, explore):
            raise NotImplementedError

    assert declared(Declares(), "squashed") is True and Declares().wants_env_obs is False


def test_an_algorithm_whose_actor_declares_no_facts_trains_evaluates_and_loads(tmp_path):
    run = tmp_path / "run"
    train(tiny_cfg("algo.name=test_names:Plain", "env.id=pettingzoo.classic.rps_v2",
                   "train.steps=20", "log.every=10"), run)
    assert read_metrics(run)[-1]["env_steps"] == 20
    report = evaluate(run, episodes=2, vs="random", opening=1)
    assert report
    policy = load_policy(run)
    assert policy.act(policy.observation_space.sample()) == 1

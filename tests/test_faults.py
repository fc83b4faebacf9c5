"""A training run survives env copies that raise: their partial episodes go, the rest stays exact."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from helpers import CLI_QUIET, QUIET, read_metrics

from interplay.algos.base import REGISTRY, Algorithm, register
from interplay.cli import main
from interplay.config import algo as algo_config
from interplay.config import model as model_config
from interplay.config.loading import load
from interplay.data.rollout import RolloutStorage
from interplay.experiment.loop import train
from interplay.run.actors import ActBatch
from interplay.run.transitions import Transitions


def two(obs, agent):
    return 2


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_flaky_env_episodes_that_finish_are_exact(tmp_path, vectorization):
    cfg = load([], ["env.id=faulty_envs:flaky_counter", "env.kwargs.p=0.05", "env.num_envs=4",
                    f"env.vectorization={vectorization}", "env.max_failures=50",
                    "train.steps=1200", "log.every=400", *QUIET,
                    "policies.a.type=scripted", f"policies.a.fn={__name__}:two"])
    train(cfg, tmp_path)
    rows = read_metrics(tmp_path)
    # Each step pays a_i (t + 1) * (i + 1) + 1 over 6 steps: 27 and 48 for whole episodes.
    for row in rows:
        assert row["agent_return_min/a_0"] == row["agent_return_max/a_0"] == 27
        assert row["agent_return_min/a_1"] == row["agent_return_max/a_1"] == 48
        assert row["episode_len_mean"] == 6
    last = rows[-1]
    assert last["env_failures"] > 0 and last["episodes_dropped"] == last["env_failures"]
    assert last["episodes"] + last["episodes_dropped"] >= 1200 // 6 - 4


class _Twos:
    squashed = False
    wants_env_obs = False

    def act(self, batch: ActBatch, explore: bool) -> tuple[np.ndarray, dict]:
        return np.full(len(batch.obs), 2), {}


class Recorder(Algorithm):
    """Acts like ``two`` and keeps every transition handed to it."""

    name = "fault_recorder"
    seen: list[Transitions] = []

    def actor(self, pid: str) -> _Twos:
        return _Twos()

    def make_storage(self, num_envs: int) -> RolloutStorage:
        return RolloutStorage({p: len(s.agents) for p, s in self.specs.items()}, num_envs)  # never cleared: the test's run is short

    def collect(self, pid: str, batch: Transitions) -> None:
        Recorder.seen.append(batch)


def _delivered_episodes(batches: list[Transitions]) -> list[list[float]]:
    """Per (copy, agent) stream, the rewards of each run of transitions up to a done flag (an
    episode, or a dropped one's fragment run together with the next), the run still going at
    the end of training left out."""
    runs: dict[tuple[int, int], list[list[float]]] = defaultdict(lambda: [[]])
    for t in batches:
        for e, s, r, end in zip(t.env, t.slot, t.reward, t.terminated | t.truncated, strict=True):
            runs[int(e), int(s)][-1].append(float(r))
            if end:
                runs[int(e), int(s)].append([])
    return [ep for eps in runs.values() for ep in eps[:-1]]


@pytest.fixture
def recorder():
    """:class:`Recorder` registered for one test only: tests after it in the same process
    (the docs' and README's lists of algorithms) see the registry as the package leaves it."""
    registries = (REGISTRY, algo_config.SETTINGS, model_config._RECURRENT)
    saved = [dict(r) for r in registries]
    register(Recorder)
    yield Recorder
    for registry, before in zip(registries, saved, strict=True):
        registry.clear()
        registry.update(before)


@pytest.mark.parametrize("vectorization", ["sync", "async"])
@pytest.mark.parametrize("mode", ["complete_episodes", "truncate_episodes"])
def test_no_fragment_of_a_dropped_episode_reaches_the_learner(tmp_path, vectorization, mode,
                                                             recorder):
    Recorder.seen = []
    cfg = load([], ["env.id=faulty_envs:flaky_counter", "env.kwargs.p=0.04", "env.num_envs=4",
                    f"env.vectorization={vectorization}", "env.max_failures=50",
                    f"algo.name={Recorder.name}", f"train.batch_mode={mode}",
                    "train.steps=1200", *QUIET, "checkpoint.at_end=false"])
    train(cfg, tmp_path)
    episodes = _delivered_episodes(Recorder.seen)
    whole = [ep for ep in episodes if len(ep) == 6 and sum(ep) in (27, 48)]
    dropped = read_metrics(tmp_path)[-1]["episodes_dropped"]
    assert dropped > 0 and len(whole) > 100
    if mode == "complete_episodes":
        assert whole == episodes  # every episode handed out is whole and exact
    else:  # handed out step by step: the dropped episodes' beginnings were learned from
        assert len(whole) < len(episodes)


def test_a_learning_run_survives_flaky_copies(tmp_path):
    cfg = load([], ["env.id=faulty_envs:flaky_counter", "env.kwargs.p=0.05", "env.num_envs=4",
                    "env.max_failures=50", "algo.name=ippo", "train.steps=800",
                    *QUIET])
    result = train(cfg, tmp_path)
    assert result.env_steps == 800 and read_metrics(tmp_path)[-1]["env_failures"] > 0


def test_an_env_that_always_raises_stops_with_its_own_error(tmp_path, capsys):
    code = main(["train", "-s", "env.id=faulty_envs:flaky_counter", "-s", "env.kwargs.p=1.0",
                 "-s", "env.max_failures=3", "-s", "train.steps=100", *CLI_QUIET, "--run-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "flaky step" in err


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_a_nan_reward_stops_the_run_naming_agent_policy_and_step(tmp_path, capsys, vectorization):
    code = main(["train", "-s", "env.id=faulty_envs:nan_reward", "-s", "env.kwargs.after=40",
                 "-s", "env.num_envs=2", "-s", f"env.vectorization={vectorization}",
                 "-s", "algo.name=ippo", "-s", "policies.pair.agents=[a_0, a_1]",
                 "-s", "train.steps=400", *CLI_QUIET, "--run-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "reward of agent 'a_1' (policy 'pair')" in err and "at env step 82" in err  # the 41st step of both copies
    assert "Traceback" not in err

"""A self-play league on Ray env runners: the members act in the runners, the learner keeps
the pool, the ratings and the sampler.

The Ray runs need the ``ray`` extra and are marked slow (``make slow``); one local Ray (2 CPUs,
bound to 127.0.0.1) serves them all.
"""

from __future__ import annotations

import json

import pytest
from helpers import local_numbers

from interplay.config.loading import load
from interplay.experiment.loop import Experiment, resume, train
from interplay.run.callbacks import Callbacks

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false", "train.device=cpu"]
LEAGUE = ["env.id=pettingzoo.classic.connect_four_v3", "train.self_play=true", "algo.name=ippo",
          "env.num_envs=2", "algo.rollout=32", "algo.epochs=1", "algo.minibatches=2",
          "algo.model.hidden=[16]", "train.seed=5", "train.test_frequency=-1",
          "league.snapshot_every=96", "league.max_snapshots=2",
          "league.opponent_sampling=pfsp", "league.against_self=0.25",
          "league.fixed=[random, 'interplay.envs.connect_four:one_ply']",
          "log.every=96", "checkpoint.every=192", *QUIET]
def _ray(runners: int = 1) -> list[str]:
    return ["backend.name=ray", f"backend.num_env_runners={runners}"]


def _lines(run) -> list[dict]:
    return [json.loads(x) for x in (run / "league.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def local_ray():
    pytest.importorskip("ray")
    from interplay.backends.ray.cluster import connect, disconnect
    from interplay.config.schema import BackendConfig

    started = connect(BackendConfig(name="ray"), num_cpus=2)
    yield
    disconnect(started)


@pytest.fixture(scope="module")
def straight(local_ray, tmp_path_factory):
    """The same league trained 384 env steps here and on one Ray runner."""
    root = tmp_path_factory.mktemp("league")
    train(load([], [*LEAGUE, "train.steps=384"]), root / "local")
    train(load([], [*LEAGUE, "train.steps=384", *_ray(1)]), root / "ray")
    return root


@pytest.mark.slow
def test_one_runner_plays_the_local_league_number_for_number(straight):
    local, remote = _lines(straight / "local"), _lines(straight / "ray")
    assert remote == local
    assert local_numbers(straight / "ray") == local_numbers(straight / "local")
    # every kind of member played: the scripted one, random, and the snapshots
    games = {m["name"]: m["games"] for line in local for m in line["members"]}
    assert games["random"] > 0 and games["interplay.envs.connect_four:one_ply"] > 0
    assert any(n.startswith("snapshot_") and g > 0 for n, g in games.items())
    assert local[-1]["games_against_self"] > 0  # and games against itself, on the runner too


@pytest.mark.slow
def test_a_league_on_ray_resumes_exactly(straight, tmp_path):
    train(load([], [*LEAGUE, "train.steps=192", *_ray(1)]), tmp_path / "split")
    resume(tmp_path / "split", ["train.steps=384"])
    assert _lines(tmp_path / "split") == _lines(straight / "ray")
    assert local_numbers(tmp_path / "split") == local_numbers(straight / "ray")


@pytest.mark.slow
def test_two_runners_rate_every_member(local_ray, tmp_path):
    """Each runner hears of the other's games, by side (``league.pfsp_sides`` draws from them)."""
    result = train(load([], [*LEAGUE, "train.steps=384", "league.pfsp_sides=true", *_ray(2)]),
                   tmp_path / "run")
    lines = _lines(tmp_path / "run")
    assert [line["env_steps"] for line in lines] == list(range(96, 385, 96))
    last = lines[-1]
    names = {m["name"] for m in last["members"]}
    assert {"random", "interplay.envs.connect_four:one_ply"} <= names
    assert names | {"learner"} <= set(last["ratings"])
    games: dict[str, int] = {}
    for line in lines:  # each member's games, the sum of its outcomes, only go up
        for m in line["members"]:
            assert sum(m["learner_win_draw_loss"]) == m["games"] >= games.get(m["name"], 0)
            by_side = m["by_side"] or [[0, 0, 0], [0, 0, 0]]
            assert [a + b for a, b in zip(*by_side, strict=True)] == m["learner_win_draw_loss"]
            games[m["name"]] = m["games"]
    assert games["random"] > 0 and games["interplay.envs.connect_four:one_ply"] > 0
    assert any(g > 0 for n, g in games.items() if n.startswith("snapshot_"))
    assert last["ratings"]["learner"] != 1000.0
    assert 0 < sum(games.values()) <= result.episodes


EXPLOITER = ("league.exploiters=[{kind: main, num_envs: 2, min_games: 4, threshold: 0.5, "
             "max_steps: 2000}]")


@pytest.mark.slow
def test_exploiters_and_checks_train_beside_a_league_on_ray(local_ray, tmp_path):
    """A main exploiter and an exploitability check train in the learner's process while the
    league's members act in the runners; with one runner the run is the local one, number for
    number, and it resumes exactly."""
    common = [*LEAGUE, EXPLOITER, "league.exploit_every=192", "league.exploit_steps=96"]
    train(load([], [*common, "train.steps=384"]), tmp_path / "local")
    train(load([], [*common, "train.steps=384", *_ray(1)]), tmp_path / "ray")
    local, remote = _lines(tmp_path / "local"), _lines(tmp_path / "ray")
    assert remote == local
    assert all(line["exploiters"][0]["env_steps"] > 0 for line in remote)
    assert any("exploitability" in line for line in remote)
    assert local_numbers(tmp_path / "ray") == local_numbers(tmp_path / "local")
    train(load([], [*common, "train.steps=192", *_ray(1)]), tmp_path / "split")
    resume(tmp_path / "split", ["train.steps=384"])
    assert _lines(tmp_path / "split") == remote


class _KillRunner(Callbacks):
    """Kills env runner ``index``'s actor the first time the learner is about to learn."""

    def __init__(self, index: int):
        self.index, self.done = index, False

    def on_sample_end(self, *, runner, env_steps):
        if not self.done:
            self.done = True
            import ray

            ray.kill(runner.handles[self.index])


@pytest.mark.slow
def test_a_replaced_runner_gets_the_pool_again(local_ray, tmp_path):
    exp = Experiment(load([], [*LEAGUE, "train.steps=384", *_ray(2)]), tmp_path / "run")
    exp.callbacks.callbacks.append(_KillRunner(0))  # here only: the runners never see it
    try:
        result = exp.run()
    finally:
        exp.close()
    assert result.env_steps == 384 and result.rows[-1]["runner_restarts"] == 1
    last = _lines(tmp_path / "run")[-1]
    assert {m["name"] for m in last["members"]} <= set(last["ratings"])
    assert sum(m["games"] for m in last["members"]) > 0


@pytest.mark.slow
def test_a_taught_learner_learns_on_a_ray_runner_as_it_does_here(local_ray, tmp_path):
    taught = [*LEAGUE, "train.steps=192", "algo.teacher=interplay.envs.connect_four:forced",
              "algo.teacher_replay=64"]
    train(load([], taught), tmp_path / "local")
    train(load([], [*taught, *_ray(1)]), tmp_path / "ray")
    here = local_numbers(tmp_path / "local")
    assert any("teacher_ce/shared" in row for row in here)
    assert local_numbers(tmp_path / "ray") == here

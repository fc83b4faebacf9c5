"""A league whose members act in env runners on several nodes, and ``backend.placement: pack``,
on the loopback cluster of tests/test_ray_cluster.py (three one-CPU nodes on this machine).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow  # a cluster and its actors take seconds each

import test_ray_cluster  # noqa: E402
from helpers import read_metrics  # noqa: E402
from test_ray_cluster import IPPO, _alive, _LoseNode, _run_losing_a_node  # noqa: E402

from interplay.cli import main  # noqa: E402
from interplay.config.loading import load  # noqa: E402
from interplay.experiment.loop import Experiment  # noqa: E402

# This module's own cluster, made as tests/test_ray_cluster.py makes its own.
cluster, nodes = test_ray_cluster.cluster, test_ray_cluster.nodes

FIXED = ["random", "interplay.envs.connect_four:one_ply"]
LEAGUE = ["env.id=pettingzoo.classic.connect_four_v3", "train.self_play=true", "algo.name=ippo",
          "env.num_envs=2", "algo.rollout=32", "algo.epochs=1", "algo.minibatches=2",
          "algo.model.hidden=[16]", "train.seed=5", "train.test_frequency=-1",
          "league.snapshot_every=96", "league.max_snapshots=2", "league.opponent_sampling=pfsp",
          f"league.fixed=[{FIXED[0]}, '{FIXED[1]}']", "log.every=96", "checkpoint.every=192",
          "log.console=false", "log.tensorboard=false", "log.curve=false", "train.device=cpu",
          "backend.name=ray", "backend.num_env_runners=2", "backend.placement=spread"]


def _lines(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "league.jsonl").read_text().splitlines()]


def _games(line: dict) -> dict[str, int]:
    return {m["name"]: m["games"] for m in line["members"]}


def _check_rated(lines: list[dict]) -> None:
    """Every member's games are the sum of its outcomes, only go up, and every member is rated."""
    games: dict[str, int] = {}
    for line in lines:
        for m in line["members"]:
            assert sum(m["learner_win_draw_loss"]) == m["games"] >= games.get(m["name"], 0)
            games[m["name"]] = m["games"]
        assert {m["name"] for m in line["members"]} | {"learner"} <= set(line["ratings"])
    assert all(games[name] > 0 for name in FIXED)
    assert any(g > 0 for n, g in games.items() if n.startswith("snapshot_"))


def test_a_league_s_runners_on_two_nodes_rate_every_member(nodes, tmp_path, capsys):
    run = tmp_path / "run"
    exp = Experiment(load([], [*LEAGUE, "train.steps=384"]), run)
    try:
        where = exp.remote.nodes()
        result = exp.run()
    finally:
        exp.close()
    assert len(set(where)) == 2 and set(where) <= {n["NodeID"] for n in _alive()}
    assert result.env_steps == 384
    lines = _lines(run)
    assert [line["env_steps"] for line in lines] == list(range(96, 385, 96))
    _check_rated(lines)
    assert sum(_games(lines[-1]).values()) <= result.episodes
    assert main(["league", str(run)]) == 0
    assert (run / "ratings.png").exists()
    capsys.readouterr()
    assert main(["eval", str(run), "--vs", "random", "--episodes", "4", "--seed", "1"]) == 0
    assert "random" in capsys.readouterr().out


class _Told:
    """Records what the league tells each runner before its blocks: (runner, fresh, members
    sent, env steps then)."""

    def __init__(self, exp: Experiment):
        [self.passenger] = exp.remote.passengers
        self.runner = exp.remote
        self.orders = self.passenger.orders
        self.log: list[tuple[int, bool, list[dict[str, Any]], int]] = []
        self.passenger.orders = self  # type: ignore[method-assign]

    def __call__(self, runner: int, fresh: bool) -> dict[str, Any]:
        out = self.orders(runner, fresh)
        self.log.append((runner, fresh, out["members"], self.runner.env_steps))
        return out


def test_a_league_runner_lost_with_its_node_gets_the_pool_again(nodes, tmp_path):
    run = tmp_path / "run"
    exp = Experiment(load([], [*LEAGUE, "train.steps=576", "backend.max_restarts=2"]), run)
    lose = _LoseNode(nodes)
    exp.callbacks.callbacks.append(lose)  # here only: the runners never see it
    told = _Told(exp)
    try:
        before = exp.remote.nodes()
        result = exp.run()
        after = exp.remote.nodes()
    finally:
        exp.close()
    assert result.env_steps == 576 and lose.removed in before and lose.removed not in after
    lost = before.index(lose.removed)
    # the replacement is told the whole pool afresh: each snapshot with its weights
    fresh = [(members, at) for r, f, members, at in told.log if r == lost and f]
    assert len(fresh) == 2
    members, lost_at = fresh[1]
    snapshots = [m for m in members if m["kind"] == "snapshot"]
    assert snapshots and all("state" in m for m in snapshots)
    assert {m["name"] for m in members} >= set(FIXED)
    lines = _lines(run)
    _check_rated(lines)
    rated_then = sum(_games(next(x for x in lines if x["env_steps"] >= lost_at)).values())
    assert sum(_games(lines[-1]).values()) > rated_then  # games go on being rated
    rows = [r for r in read_metrics(run) if r["phase"] == "train"]
    assert rows[0]["ray/runners_lost"] == 0 and rows[-1]["ray/runners_lost"] == 1
    assert rows[-1]["runner_restarts"] == 1


def test_pack_puts_the_runners_on_as_few_nodes_as_fit(nodes, tmp_path):
    # two runners of half a CPU fit on one one-CPU node; three of one CPU need all three
    for cpus, runners, fit in ((0.5, 2, 1), (1, 3, 3)):
        exp = Experiment(load([], [*IPPO, "train.steps=48", "backend.name=ray",
                                   f"backend.num_env_runners={runners}",
                                   f"backend.cpus_per_runner={cpus}", "backend.envs_per_runner=2",
                                   "backend.placement=pack"]), tmp_path / f"run{runners}")
        try:
            where = exp.remote.nodes()
            assert exp.run().env_steps == 48
        finally:
            exp.close()
        assert len(set(where)) == fit, (cpus, runners, where)


def test_a_packed_runner_lost_with_its_node_starts_again_in_its_bundle(nodes, tmp_path):
    result, removed, now = _run_losing_a_node(nodes, tmp_path / "run", 128,
                                              "backend.placement=pack")
    assert result.env_steps == 128 and removed not in now
    assert read_metrics(tmp_path / "run")[-1]["ray/runners_lost"] == 1

"""Ray across several nodes: a loopback cluster of three one-CPU nodes on this machine (Ray's
own ``ray.cluster_utils.Cluster``), shared by the module. Runners spread over the nodes, a node
lost while a run trains, search members on several nodes, the learner's GPUs asked of the
cluster.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow  # a cluster and its actors take seconds each

from helpers import QUIET, read_metrics  # noqa: E402

from interplay import load_policy  # noqa: E402
from interplay.backends import map_members  # noqa: E402
from interplay.backends.ray.cluster import (  # noqa: E402
    LOOPBACK,
    WorkLostError,
    reserve_learner,
)
from interplay.backends.ray.runners import RunnerFailedError  # noqa: E402
from interplay.config.loading import load  # noqa: E402
from interplay.config.schema import BackendConfig  # noqa: E402
from interplay.errors import ConfigError, UserError  # noqa: E402
from interplay.experiment.loop import Experiment, resume  # noqa: E402
from interplay.experiment.run_store.checkpoint import latest_valid, load_checkpoint  # noqa: E402
from interplay.run.callbacks import Callbacks  # noqa: E402

NODES = 3
STORE = 80 * 2**20  # bytes of object store per node: the least Ray takes
IPPO = ["env.id=spread", "env.num_envs=4", "algo.name=ippo", "algo.rollout=16", "algo.epochs=1",
        "algo.minibatches=2", "train.seed=3", "train.test_frequency=-1", "log.every=64",
        "train.device=cpu", *QUIET]


@pytest.fixture(scope="module")
def cluster():
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    # As a Ray started by a run: loopback only, no usage reports.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray_constants.ENABLE_RAY_CLUSTER = False
    assert not ray.is_initialized()
    # the tasks below are this module's functions: their code travels with them
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False,
        # a lost node is noticed within about a second
        "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3,
                           "health_check_initial_delay_ms": 0}})
    try:
        for _ in range(NODES - 1):
            c.add_node(num_cpus=1, object_store_memory=STORE)
        ray.init(address=c.address, configure_logging=False)
        c.wait_for_nodes()
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture
def nodes(cluster):
    """The cluster with all its nodes up (a test before may have removed some)."""
    while len(cluster.worker_nodes) < NODES - 1:
        cluster.add_node(num_cpus=1, object_store_memory=STORE)
    cluster.wait_for_nodes()
    return cluster


def _alive() -> list[dict]:
    return [n for n in ray.nodes() if n["Alive"]]


def _ray(runners: int = 2, *more: str) -> list[str]:
    return ["backend.name=ray", f"backend.num_env_runners={runners}", "backend.envs_per_runner=2",
            "backend.placement=spread", *more]


def test_every_node_of_the_cluster_is_on_loopback(nodes):
    alive = _alive()
    assert len(alive) == NODES
    assert {n["NodeManagerAddress"] for n in alive} <= set(LOOPBACK)
    gcs = ray.get_runtime_context().gcs_address
    assert gcs.rsplit(":", 1)[0] in LOOPBACK


def test_spread_runners_land_on_different_nodes(nodes, tmp_path):
    exp = Experiment(load([], [*IPPO, "train.steps=64", *_ray(2)]), tmp_path / "run")
    try:
        where = exp.remote.nodes()
        assert len(set(where)) == 2 and set(where) <= {n["NodeID"] for n in _alive()}
        result = exp.run()
    finally:
        exp.close()
    assert result.env_steps == 64


class _LoseNode(Callbacks):
    """Removes the node of an env runner (not the head's: the driver lives there) the first
    time the learner is about to learn."""

    def __init__(self, cluster):
        self.cluster, self.removed = cluster, None

    def on_sample_end(self, *, runner, env_steps):
        if self.removed is not None:
            return
        head = self.cluster.head_node.node_id
        victim = next(n for n in runner.nodes() if n != head)
        node = next(n for n in self.cluster.worker_nodes if n.node_id == victim)
        self.cluster.remove_node(node)
        self.removed = victim


def _run_losing_a_node(cluster, run_dir: Path, steps: int, *more: str):
    exp = Experiment(load([], [*IPPO, f"train.steps={steps}", "checkpoint.every=64",
                               *_ray(2, *more)]), run_dir)
    lose = _LoseNode(cluster)
    exp.callbacks.callbacks.append(lose)  # here only: the runners never see it
    try:
        return exp.run(), lose.removed, exp.remote.nodes()
    finally:
        exp.close()


def test_a_lost_node_s_runner_starts_again_elsewhere_and_the_run_completes(nodes, tmp_path):
    result, removed, now = _run_losing_a_node(nodes, tmp_path / "run", 256)
    assert result.env_steps == 256 and removed not in now
    train_rows = [r for r in read_metrics(tmp_path / "run") if r["phase"] == "train"]
    first, last = train_rows[0], train_rows[-1]
    assert (first["ray/runners_lost"], first["ray/episodes_dropped"]) == (0, 0)
    # one runner of two copies lost: its two episodes under way are dropped, not counted
    assert (last["ray/runners_lost"], last["ray/episodes_dropped"]) == (1, 2)
    assert last["runner_restarts"] == 1
    for row in train_rows:
        assert row["ray/sample_wait_s"] >= 0 and row["ray/learn_s"] > 0
        assert 0 <= row["ray/sample_share"] <= 1
    saved, _ = load_checkpoint(latest_valid(tmp_path / "run"))
    assert saved["runner"]["counters"][0] == 256
    policy = load_policy(tmp_path / "run")
    assert policy.act(policy.observation_space.sample()[None]) is not None


def test_past_max_restarts_the_run_stops_in_a_checkpoint_that_resumes(nodes, tmp_path):
    with pytest.raises(RunnerFailedError) as caught:
        _run_losing_a_node(nodes, tmp_path / "run", 256, "backend.max_restarts=0")
    said = str(caught.value)
    assert isinstance(caught.value, UserError)  # the CLI prints it, with no traceback
    assert "env runner" in said and "on node" in said and "backend.max_restarts: 0" in said
    assert "ActorDiedError" in said and "checkpoint" in said and "interplay resume" in said
    with pytest.warns(UserWarning, match="env runners were lost"):
        resumed = resume(tmp_path / "run", ["backend.max_restarts=3"])
    assert resumed.env_steps == 256


def _node_of_task(_: int) -> str:
    time.sleep(0.5)  # long enough that one worker does not take every item
    return ray.get_runtime_context().get_node_id()


def test_spread_members_run_on_several_nodes(nodes):
    cfg = BackendConfig(name="ray", placement="spread")
    where = map_members(_node_of_task, range(3), cfg, num_cpus=1)
    assert len(set(where)) >= 2


def _first_attempt_waits(folder: str) -> str:
    """Writes where it runs; the first attempt then waits to be lost with its node."""
    first = not any(Path(folder).iterdir())
    node = ray.get_runtime_context().get_node_id()
    (Path(folder) / uuid.uuid4().hex).write_text(node)
    if first:
        time.sleep(60)
    return node


def _lose_once_started(cluster, folder: Path):
    """Removes a worker node as soon as a task in ``folder`` says it started there; returns
    that node."""
    victim = next(iter(cluster.worker_nodes))

    def lose_it():
        while not any(folder.iterdir()):
            time.sleep(0.05)
        cluster.remove_node(victim)

    threading.Thread(target=lose_it, daemon=True).start()
    return victim


def _on(node) -> dict:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    # soft: a task run again goes to another node once this one is gone
    return {"num_cpus": 1, "scheduling_strategy": NodeAffinitySchedulingStrategy(node.node_id,
                                                                                 soft=True)}


def test_a_member_lost_with_its_node_runs_again_from_its_start(nodes, tmp_path):
    victim = _lose_once_started(nodes, tmp_path)
    [node] = map_members(_first_attempt_waits, [str(tmp_path)], BackendConfig(name="ray"),
                         **_on(victim))
    attempts = sorted(p.read_text() for p in tmp_path.iterdir())
    assert len(attempts) == 2 and victim.node_id in attempts and node != victim.node_id


def test_a_member_lost_past_max_restarts_is_named(nodes, tmp_path):
    victim = _lose_once_started(nodes, tmp_path)
    with pytest.raises(WorkLostError, match=r"job 0 of 1 was lost 1 time.*max_restarts: 0"):
        map_members(_first_attempt_waits, [str(tmp_path)],
                    BackendConfig(name="ray", max_restarts=0), **_on(victim))


def test_a_search_on_the_cluster_spreads_its_members(nodes, tmp_path):
    import json

    from interplay.population.hpo import search

    cfg = load([], ["algo.name=ippo", "env.id=spread", "env.num_envs=2", "algo.rollout=8",
                    "algo.epochs=1", "hpo.population=2", "hpo.generations=1",
                    "hpo.evo_steps=32", "train.test_episodes=1", "train.device=cpu", *QUIET,
                    "backend.name=ray", "backend.placement=spread"])
    search(cfg, tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "hpo.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["env_steps"] == 32 for r in rows)


def test_gpus_for_the_learner_are_refused_where_the_cluster_has_none(nodes, tmp_path):
    with pytest.raises(ConfigError, match=r"gpus_for_learner: the learner asks for 1 GPU\(s\) "
                                          r"and the Ray cluster has 0"):
        reserve_learner(BackendConfig(name="ray", gpus_for_learner=1))
    with pytest.raises(ConfigError, match="gpus_for_learner is 1, but the learner would run on cpu"):
        Experiment(load([], [*IPPO, *_ray(1), "backend.gpus_for_learner=1"]), tmp_path / "run")
    assert not (tmp_path / "run").exists()

"""The Ray backend: env runners as Ray actors, the learner here.

Needs the ``ray`` extra, which ``make test`` installs; skipped only where Ray is not installed.
One local Ray (2 CPUs, bound to 127.0.0.1) serves the whole module.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

# Each test starts Ray runners (seconds apiece, minutes in all): CI runs them with make slow.
pytestmark = pytest.mark.slow

from helpers import RAY_ONLY, read_metrics  # noqa: E402

from interplay.backends import map_members  # noqa: E402
from interplay.backends.ray.cluster import connect, disconnect  # noqa: E402
from interplay.backends.ray.runners import RunnerFailedError  # noqa: E402
from interplay.config.loading import load  # noqa: E402
from interplay.config.schema import BackendConfig  # noqa: E402
from interplay.experiment.loop import Experiment, resume, train  # noqa: E402
from interplay.run.callbacks import Callbacks  # noqa: E402

TIMING = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}
QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false", "train.device=cpu"]
IPPO = ["env.id=spread", "env.num_envs=4", "algo.name=ippo", "algo.rollout=16", "algo.epochs=1",
        "algo.minibatches=2", "train.seed=3", "train.test_frequency=192", "train.test_episodes=2",
        "log.every=64", *QUIET]


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    started = connect(BackendConfig(name="ray"), num_cpus=2)
    yield
    disconnect(started)


def _numbers(rows):
    return [{k: v for k, v in r.items() if k not in TIMING | RAY_ONLY} for r in rows]


def _ray(runners: int = 1, *more: str) -> list[str]:
    return ["backend.name=ray", f"backend.num_env_runners={runners}", *more]


def test_one_runner_is_the_local_run(tmp_path):
    local = train(load([], [*IPPO, "train.steps=384"]), tmp_path / "local")
    remote = train(load([], [*IPPO, "train.steps=384", *_ray(1)]), tmp_path / "ray")
    assert _numbers(remote.rows) == _numbers(local.rows)
    assert [r["phase"] for r in remote.rows].count("test") == 2
    assert all(r["runner_restarts"] == 0 and r["policy_lag"] == 0
               for r in remote.rows if r["phase"] == "train")


def test_qmix_learns_on_the_envs_state_gathered_by_runners(tmp_path):
    # the env's global state travels with the transitions from the runners to the learner
    import numpy as np

    exp = Experiment(load([], [
        "env.id=interplay.envs.toy:hidden_goal", "algo.name=qmix", "algo.state=env",
        "algo.learning_starts=64", "algo.batch_size=16", "env.num_envs=2", "train.steps=192",
        "train.test_frequency=-1", "log.every=64", *QUIET, *_ray(2)]), tmp_path / "run")
    try:
        result = exp.run()
        buffer = exp.storage.buffer
        n = len(buffer)
        state, nxt = buffer.states["state"][:n], buffer.states["next_state"][:n]
        cells = buffer.columns["agent"]["obs"][:n, :, 0]
        next_cells = buffer.columns["agent"]["next_obs"][:n, :, 0]
    finally:
        exp.close()
    assert n == 192 and any("loss" in r for r in result.rows)
    assert np.array_equal(state[:, 3:], cells) and np.array_equal(nxt[:, 3:], next_cells)
    assert np.array_equal(nxt[:, 1], state[:, 1] + 1) and len(np.unique(state[:, 2])) > 1


def test_two_runners_report_as_local_does(tmp_path):
    common = ["train.steps=256", "log.every=128", *QUIET]
    local = train(load([], common), tmp_path / "local")
    remote = train(load([], [*common, *_ray(2, "backend.envs_per_runner=2")]), tmp_path / "ray")
    assert remote.env_steps == local.env_steps == 256
    for a, b in zip(local.rows, remote.rows, strict=True):
        assert set(b) - set(a) == RAY_ONLY and set(a) <= set(b)
    assert all(r.get("runner_restarts", 0) == 0 for r in remote.rows)
    assert sorted(p.name for p in (tmp_path / "ray").iterdir()) == sorted(
        p.name for p in (tmp_path / "local").iterdir())


def test_off_policy_learners_sample_ahead_with_a_bounded_lag(tmp_path):
    cfg = load([], ["env.id=spread", "env.num_envs=2", "algo.name=dqn", "algo.batch_size=16",
                    "algo.learning_starts=32", "algo.train_every=4", "train.steps=400",
                    "log.every=200", *QUIET, *_ray(2, "backend.steps_per_call=8")])
    result = train(cfg, tmp_path / "run")
    lags = [r["policy_lag"] for r in result.rows if r["phase"] == "train"]
    # Updates every 4 env steps, 4 env steps a step: at most the updates of two blocks.
    assert max(lags) >= 1 and max(lags) <= 2 * 8
    assert result.env_steps == 400


class _KillRunner(Callbacks):
    """Kills env runner ``index``'s actor the first time the learner is about to learn."""

    def __init__(self, index: int, times: int = 1):
        self.index, self.times = index, times

    def on_sample_end(self, *, runner, env_steps):
        if self.times:
            self.times -= 1
            ray.kill(runner.handles[self.index])


def _run_with(tmp_path: Path, killer: Callbacks, *more: str):
    cfg = load([], [*IPPO, "train.steps=256", *_ray(2, "backend.envs_per_runner=2", *more)])
    exp = Experiment(cfg, tmp_path / "run")
    exp.callbacks.callbacks.append(killer)  # here only: the runners never see it
    try:
        return exp.run()
    finally:
        exp.close()


def test_a_killed_runner_is_replaced_and_counted(tmp_path):
    result = _run_with(tmp_path, _KillRunner(1))
    assert result.env_steps == 256
    train_rows = [r for r in result.rows if r["phase"] == "train"]
    assert train_rows[0]["runner_restarts"] == 0 and train_rows[-1]["runner_restarts"] == 1
    rows = read_metrics(tmp_path / "run")
    assert rows[-1]["phase"] == "test" and rows[-1]["episode_return_mean"] is not None


def test_past_max_restarts_the_run_stops_naming_the_runner(tmp_path):
    with pytest.raises(RunnerFailedError, match=r"(?s)env runner 1 on node .* died .*killed by `ray.kill`.*backend.max_restarts: 0.*checkpoint"):
        _run_with(tmp_path, _KillRunner(1), "backend.max_restarts=0")


@pytest.mark.parametrize(("first", "then"), [("local", "ray"), ("ray", "local")])
def test_resume_across_backends_continues_exactly(tmp_path, first, then):
    on = {"local": [], "ray": _ray(1)}
    straight = train(load([], [*IPPO, "train.steps=384"]), tmp_path / "straight")
    train(load([], [*IPPO, "train.steps=192", *on[first]]), tmp_path / "split")
    resumed = resume(tmp_path / "split", ["train.steps=384", *(on[then] or ["backend.name=local"])])
    assert resumed.env_steps == straight.env_steps == 384
    assert _numbers(read_metrics(tmp_path / "split")) == _numbers(read_metrics(tmp_path / "straight"))


def test_resume_on_another_layout_starts_fresh_episodes(tmp_path):
    train(load([], [*IPPO, "train.steps=192", *_ray(2, "backend.envs_per_runner=2")]),
          tmp_path / "run")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = resume(tmp_path / "run", ["train.steps=320", "backend.name=local"])
    assert resumed.env_steps == 320
    said = " ".join(str(w.message) for w in caught)
    assert "2 runners of 2" in said and "one runner of 4" in said


def test_no_ray_server_listens_beyond_loopback():
    """Every socket the Ray started here listens on is a loopback one."""
    ours = _descendants(os.getpid())
    assert ours, "no Ray processes found under this one"
    inodes = {inode: addr for inode, addr in _listening()}
    exposed = []
    for pid in ours:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                addr = inodes[link[8:-1]]
                if not _loopback(addr):
                    exposed.append((pid, addr))
    assert not exposed


def test_the_local_ray_is_one_node_on_loopback():
    import ray

    nodes = [n for n in ray.nodes() if n["Alive"]]
    assert len(nodes) == 1 and nodes[0]["NodeManagerAddress"] == "127.0.0.1"
    assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")


def test_map_members_on_ray_keeps_the_order():
    assert map_members(abs, [-3, 1, -2], "ray") == [3, 1, 2] == map_members(abs, [-3, 1, -2])


def _descendants(root: int) -> set[int]:
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {root}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - found
        found |= frontier
    return found


def _listening():
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[3] == "0A":  # LISTEN
                yield parts[9], parts[1].rsplit(":", 1)[0]


def _loopback(hex_addr: str) -> bool:
    if len(hex_addr) == 8:  # IPv4, little-endian
        return hex_addr.endswith("7F")
    return hex_addr in ("00000000000000000000000001000000",) or (
        hex_addr.startswith("0000000000000000FFFF0000") and hex_addr.endswith("7F"))


class _Signal(Callbacks):
    """Asks the run to stop (as SIGTERM does) once the learner has learned twice."""

    def __init__(self, stop):
        self.stop, self.seen = stop, 0

    def on_sample_end(self, *, runner, env_steps):
        self.seen += 1
        if self.seen == 2:
            self.stop.signum = 15


def test_a_stop_ends_in_a_checkpoint_of_where_the_loop_is(tmp_path):
    """Off-policy runners sample ahead; a stop still ends where the loop is, and resumes."""
    from interplay.experiment.run_store.interrupt import Interrupted, StopRequest

    common = ["env.id=spread", "env.num_envs=2", "algo.name=dqn", "algo.batch_size=16",
              "algo.learning_starts=32", "algo.train_every=16", "log.every=100", *QUIET,
              *_ray(2, "backend.steps_per_call=8")]
    exp = Experiment(load([], [*common, "train.steps=400"]), tmp_path / "run")
    stop = StopRequest()
    exp.callbacks.callbacks.append(_Signal(stop))
    try:
        with pytest.raises(Interrupted) as err:
            exp.run(stop)
    finally:
        exp.close()
    assert err.value.checkpoint is not None and 0 < err.value.env_steps < 400
    resumed = resume(tmp_path / "run", ["train.steps=400"])
    assert resumed.env_steps == 400


def test_a_search_on_ray_writes_the_rows_and_best_member_of_the_local_search(tmp_path):
    import json

    from interplay.population.hpo import search

    common = ["algo.name=ippo", "env.id=spread", "env.num_envs=8", "algo.rollout=25",
              "hpo.population=4", "hpo.generations=2", "hpo.evo_steps=400",
              "train.test_episodes=8", "hpo.init={lr: [1.0e-5, 1.0e-2]}", *QUIET]
    search(load([], common), tmp_path / "local")
    search(load([], [*common, "backend.name=ray"]), tmp_path / "ray")

    def rows(run):
        return [json.loads(line) for line in (run / "hpo.jsonl").read_text().splitlines()]

    assert len(rows(tmp_path / "ray")) == 8
    assert rows(tmp_path / "ray") == rows(tmp_path / "local")
    best = [json.loads((tmp_path / r / "best" / "member.json").read_text())
            for r in ("local", "ray")]
    assert best[0] == best[1]

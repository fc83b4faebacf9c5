"""The async vector env: same steps as the sync one, and it survives envs and workers that fail."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from faulty_envs import flaky_counter, hanging, no_agents, vanishing
from gymnasium import spaces
from helpers import QUIET, make_runner, read_metrics

from interplay.config.loading import load
from interplay.config.validation import validate
from interplay.envs.adapters import CopyStep, EnvContractError
from interplay.envs.async_vec import AsyncVecEnv, WorkerError, _await_bell
from interplay.envs.batch import StepBuffers, VecStep
from interplay.envs.copies import EnvCrashError
from interplay.envs.registry import env_factory
from interplay.envs.spaces import action_view, obs_view
from interplay.envs.vector import SyncVecEnv
from interplay.experiment.build import make_vec_env
from interplay.experiment.loop import train

TESTS = Path(__file__).parent
SRC = TESTS.parent / "src"


@pytest.fixture(autouse=True)
def deadline():
    """No test here may hang the suite: each gets 60 s (or what it sets with alarm), then fails."""
    def expire(signum, frame):
        raise TimeoutError("test ran past its deadline")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def random_actions(env, step: VecStep, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Legal random actions for every agent in every copy."""
    out = {}
    for a, view in env.action_views.items():
        mask = step.mask[a]
        if mask is None:
            out[a] = rng.integers(0, view.space.n, size=env.num_envs)
        else:
            out[a] = np.array([rng.choice(np.flatnonzero(row)) if row.any() else 0 for row in mask])
    return out


def assert_same(got: VecStep, want: VecStep, where: str) -> None:
    for name in ("acting", "reward", "terminated", "truncated", "episode_end", "dropped"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=f"{where}: {name}")
    for name in ("obs", "final_obs", "mask", "final_mask"):
        for a, arr in getattr(want, name).items():
            other = getattr(got, name)[a]
            if arr is None:
                assert other is None, f"{where}: {name}[{a}]"
            else:
                np.testing.assert_array_equal(other, arr, err_msg=f"{where}: {name}[{a}]")
    if got.raw_obs is not None:
        for e, (g, w) in enumerate(zip(got.raw_obs, want.raw_obs, strict=True)):
            assert g.keys() == w.keys(), f"{where}: raw_obs[{e}]"
            for a in w:
                _same_tree(g[a], w[a], f"{where}: raw_obs[{e}][{a}]")


def _same_tree(got, want, where: str) -> None:
    if isinstance(want, dict):
        assert got.keys() == want.keys(), where
        for k in want:
            _same_tree(got[k], want[k], f"{where}[{k}]")
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def assert_gone(pids: list[int], shm_name: str, within: float = 5.0) -> None:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not any(alive(p) for p in pids) and not Path(f"/dev/shm/{shm_name}").exists():
            return
        time.sleep(0.05)
    left = [p for p in pids if alive(p)]
    raise AssertionError(f"left behind: workers {left}, segment exists: "
                         f"{Path(f'/dev/shm/{shm_name}').exists()}")


@pytest.mark.parametrize("env_id,max_steps,spin_s", [
    ("mpe2.simple_spread_v3", 25, 0.0005),
    ("mpe2.simple_spread_v3", 25, 0.0),  # workers block on the pipe at once
    ("pettingzoo.classic.connect_four_v3", None, 0.0005),
    ("interplay.envs.toy:shifting_crowd", None, 0.0005),
])
def test_async_returns_exactly_what_sync_returns(env_id, max_steps, spin_s):
    make = env_factory(env_id)
    sync = SyncVecEnv(make, 3, max_steps)
    with AsyncVecEnv(make, 3, max_steps, num_workers=2, raw_obs=True, step_timeout_s=20,
                     spin_s=spin_s) as env:
        assert env.agents == sync.agents
        want, got = sync.reset(7), env.reset(7)
        assert_same(got, want, "reset")
        rng = np.random.default_rng(0)
        arrays = {name: getattr(got, name) for name in ("acting", "reward", "episode_end")}
        ends = 0
        for t in range(60):
            actions = random_actions(sync, want, rng)
            want, got = sync.step(actions), env.step(actions)
            assert_same(got, want, f"step {t}")
            ends += int(want.episode_end.sum())
            assert all(getattr(got, name) is arr for name, arr in arrays.items())
        assert ends > 0
        assert env.stats() == {"env_failures": 0, "episodes_dropped": 0, "worker_restarts": 0}
    sync.close()


def test_without_raw_obs_none_crosses_the_pipe():
    with AsyncVecEnv(env_factory("interplay.envs.toy:shifting_crowd"), 2, num_workers=1) as env:
        step = env.reset(0)
        assert step.raw_obs is None and step.infos is None
        assert step.acting.any()


def run_and_check_returns(env, steps: int, seed: int) -> tuple[int, int]:
    """Step ``env`` randomly; every finished episode's returns must be the plain loop's."""
    step = env.reset(seed)
    rng = np.random.default_rng(seed)
    taken: list[list[dict]] = [[] for _ in range(env.num_envs)]
    got = [defaultdict(float) for _ in range(env.num_envs)]
    finished = dropped = 0
    for _ in range(steps):
        actions = random_actions(env, step, rng)
        for e in range(env.num_envs):
            taken[e].append({a: int(actions[a][e]) for a in env.agents})
        step = env.step(actions)
        for e in range(env.num_envs):
            if step.dropped[e]:
                assert not step.reward[e].any() and not step.episode_end[e]
                assert not (step.terminated[e] | step.truncated[e]).any()
                taken[e], got[e] = [], defaultdict(float)
                dropped += 1
                continue
            for j, a in enumerate(env.agents):
                got[e][a] += step.reward[e, j]
            if step.episode_end[e]:
                assert dict(got[e]) == plain_loop_returns(taken[e])
                taken[e], got[e] = [], defaultdict(float)
                finished += 1
    return finished, dropped


def plain_loop_returns(actions: list[dict]) -> dict[str, float]:
    env = flaky_counter(p=0.0)
    env.reset(seed=0)
    total: dict[str, float] = defaultdict(float)
    for move in actions:
        _, rewards, *_ = env.step({a: move[a] for a in env.agents})
        for a, r in rewards.items():
            total[a] += r
    assert not env.agents, "the episode did not end where the vector env said it did"
    return dict(total)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_flaky_env_is_rebuilt_and_finished_returns_are_exact(kind):
    make = lambda: flaky_counter(p=0.08, reset_p=0.1)  # noqa: E731  # about half the episodes fail
    env = (SyncVecEnv(make, 4, max_failures=20) if kind == "sync" else
           AsyncVecEnv(make, 4, num_workers=2, max_failures=20, step_timeout_s=20))
    try:
        finished, dropped = run_and_check_returns(env, 150, seed=3)
        stats = env.stats()
    finally:
        env.close()
    assert finished > 20 and dropped > 5
    assert stats["episodes_dropped"] == dropped
    assert stats["env_failures"] >= dropped  # resets fail too, without dropping anything
    assert stats["worker_restarts"] == 0


def test_faults_replay_identically_in_sync_and_async():
    make = lambda: flaky_counter(p=0.1, reset_p=0.1)  # noqa: E731
    sync = SyncVecEnv(make, 3, max_failures=20)
    with AsyncVecEnv(make, 3, num_workers=2, max_failures=20, step_timeout_s=20) as env:
        want, got = sync.reset(11), env.reset(11)
        rng = np.random.default_rng(1)
        for t in range(80):
            actions = random_actions(sync, want, rng)
            want, got = sync.step(actions), env.step(actions)
            assert_same(got, want, f"step {t}")
        assert env.stats() == sync.stats() and sync.stats()["env_failures"] > 0


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_copy_that_keeps_failing_stops_with_the_env_error(kind):
    make = lambda: flaky_counter(p=1.0)  # noqa: E731
    env = (SyncVecEnv(make, 2, max_failures=3) if kind == "sync" else
           AsyncVecEnv(make, 2, num_workers=2, max_failures=3, step_timeout_s=20))
    try:
        env.reset(0)
        actions = {a: np.zeros(2, np.int64) for a in env.agents}
        for _ in range(2):  # each failure drops the episode; the rebuilt copy fails again
            assert env.step(actions).dropped.all()
        with pytest.raises(EnvCrashError, match="env copy 0 raised in step") as info:
            env.step(actions)
    finally:
        env.close()
    err = info.value
    assert isinstance(err.original, RuntimeError) and "flaky step at t=0" in str(err.original)
    assert "Traceback" in err.traceback_text and "flaky step at t=0" in err.traceback_text
    assert err.failures == 3


def test_an_env_error_in_a_worker_arrives_as_itself():
    ours = set(Path("/dev/shm").glob(f"interplay_{os.getpid()}_*"))
    with pytest.raises(EnvContractError, match="possible_agents") as info:
        AsyncVecEnv(no_agents, 2, num_workers=2)
    assert "Traceback" in str(info.value.__cause__)  # where it happened, in the worker
    assert mp.active_children() == []
    assert set(Path("/dev/shm").glob(f"interplay_{os.getpid()}_*")) <= ours


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_an_agent_that_leaves_without_a_word_ends_on_its_last_observation(vectorization):
    make = lambda: vanishing(leave=2, length=5)  # noqa: E731
    env = (SyncVecEnv(make, 2) if vectorization == "sync"
           else AsyncVecEnv(make, 2, num_workers=2, step_timeout_s=20))
    try:
        env.reset(0)
        actions = {a: np.ones(2, np.int64) for a in env.agents}
        step = env.step(actions)  # t = 1: both agents act on, a_1 sees [1, 1]
        np.testing.assert_array_equal(step.obs["a_1"], [[1, 1], [1, 1]])
        step = env.step(actions)  # t = 2: a_1 is gone, nothing said
        assert step.terminated[:, 1].all() and not step.truncated[:, 1].any()
        assert step.acting[:, 0].all() and not step.acting[:, 1].any()
        np.testing.assert_array_equal(step.final_obs["a_1"], [[1, 1], [1, 1]])
        np.testing.assert_array_equal(step.reward[:, 1], [2 * 2 + 0.5] * 2)  # paid for step 2
    finally:
        env.close()


def test_killed_worker_is_replaced_and_its_episodes_dropped():
    make = lambda: flaky_counter(p=0.0)  # noqa: E731
    with AsyncVecEnv(make, 4, num_workers=2, step_timeout_s=20) as env:
        step = env.reset(0)
        rng = np.random.default_rng(0)
        for _ in range(3):
            step = env.step(random_actions(env, step, rng))
        before = env.worker_pids()
        os.kill(before[1], signal.SIGKILL)
        step = env.step(random_actions(env, step, rng))
        np.testing.assert_array_equal(step.dropped, [False, False, True, True])
        assert not step.reward[2:].any() and step.acting[2:].all()
        np.testing.assert_array_equal(step.obs["a_0"][2:], [[0, 0], [0, 0]])
        assert env.worker_pids()[0] == before[0] and env.worker_pids()[1] != before[1]
        assert env.stats() == {"env_failures": 0, "episodes_dropped": 2, "worker_restarts": 1}
        finished, dropped = run_and_check_returns(env, 20, seed=5)
        assert finished > 0 and dropped == 0


def test_killed_worker_with_restarts_off_is_a_clear_error():
    with AsyncVecEnv(lambda: flaky_counter(p=0.0), 4, num_workers=2, max_restarts=0) as env:
        step = env.reset(0)
        pids = env.worker_pids()
        os.kill(pids[1], signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(WorkerError, match=r"worker 1 .*killed by signal SIGKILL.*max_restarts=0"):
            env.step(random_actions(env, step, np.random.default_rng(0)))
        assert time.monotonic() - start < 5
        assert_gone(pids, env.shm_name, within=2)  # the env closed itself


def test_hung_worker_is_killed_and_replaced_after_the_timeout(tmp_path):
    trigger = tmp_path / "hang"
    make = lambda: hanging(trigger=str(trigger))  # noqa: E731
    with AsyncVecEnv(make, 2, num_workers=2, step_timeout_s=1.0) as env:
        step = env.reset(0)
        pids = env.worker_pids()
        rng = np.random.default_rng(0)
        step = env.step(random_actions(env, step, rng))
        trigger.touch()
        start = time.monotonic()
        step = env.step(random_actions(env, step, rng))
        took = time.monotonic() - start
        assert 1.0 <= took < 6.0  # the timeout, then a replacement starts
        assert step.dropped.sum() == 1 and env.stats()["worker_restarts"] == 1
        assert not trigger.exists()
        hung = pids[int(np.flatnonzero(step.dropped)[0])]
        assert not alive(hung)
        env.step(random_actions(env, step, rng))


def test_hung_worker_with_restarts_off_names_the_timeout(tmp_path):
    trigger = tmp_path / "hang"
    make = lambda: hanging(trigger=str(trigger))  # noqa: E731
    with AsyncVecEnv(make, 1, step_timeout_s=0.5, max_restarts=0) as env:
        step = env.reset(0)
        trigger.touch()
        with pytest.raises(WorkerError, match=r"worker 0 .*did not answer within 0.5 s"):
            env.step(random_actions(env, step, np.random.default_rng(0)))


def test_close_leaves_nothing_behind_and_can_be_repeated():
    env = AsyncVecEnv(lambda: flaky_counter(p=0.0), 3, num_workers=2)
    env.reset(0)
    pids, name = env.worker_pids(), env.shm_name
    assert Path(f"/dev/shm/{name}").exists() and all(alive(p) for p in pids)
    env.close()
    env.close()
    assert_gone(pids, name, within=1)
    assert mp.active_children() == []
    with pytest.raises(RuntimeError, match="closed"):
        env.reset(0)


def test_an_exception_leaves_nothing_behind():
    with pytest.raises(ValueError, match="boom"), \
            AsyncVecEnv(lambda: flaky_counter(p=0.0), 2, num_workers=2) as env:
        env.reset(0)
        pids, name = env.worker_pids(), env.shm_name
        raise ValueError("boom")
    assert_gone(pids, name, within=1)


MAIN = """
import json, sys, numpy as np
from faulty_envs import flaky_counter
from interplay.envs.async_vec import AsyncVecEnv

env = AsyncVecEnv(lambda: flaky_counter(p=0.0), 2, num_workers=2)
env.reset(0)
actions = {a: np.zeros(2, np.int64) for a in env.agents}
if sys.argv[1] != "raise":
    env.step(actions)  # the signal then comes while it steps
print(json.dumps({"pids": env.worker_pids(), "shm": env.shm_name}), flush=True)
if sys.argv[1] == "raise":
    raise RuntimeError("the main process fails")
while True:
    env.step(actions)
"""


def _default_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


@pytest.mark.parametrize("how", [
    "SIGTERM",
    # The same clean-up through other ends; each starts Python, torch and two workers.
    pytest.param("raise", marks=pytest.mark.slow),
    pytest.param("SIGINT", marks=pytest.mark.slow),
])
def test_a_dying_main_process_leaves_nothing_behind(how):
    # On a loaded machine Python, torch and two workers take many seconds to start, and as
    # long to exit: the limits below are far beyond what a run needs, and cost nothing when
    # things go well, since each wait ends as soon as what it waits for has happened.
    signal.alarm(300)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)])}
    # The child starts with Ctrl-C's default, as from a shell: an ignored SIGINT is inherited,
    # and something earlier in this pytest worker process had left it ignored.
    proc = subprocess.Popen([sys.executable, "-c", MAIN, how], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=_default_signals)
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        info = json.loads(line)
        if how != "raise":
            proc.send_signal(getattr(signal, how))
        # read both pipes while waiting: a child blocked on a full pipe never exits
        err = proc.communicate(timeout=120)[1]
        code = proc.returncode
    finally:
        proc.kill()
        proc.wait()
    assert code == {"raise": 1, "SIGTERM": -signal.SIGTERM, "SIGINT": -signal.SIGINT}[how], err
    assert_gone(info["pids"], info["shm"], within=60)
    assert "leaked" not in err  # the env cleaned up, not Python's resource tracker


def test_config_picks_the_async_env():
    cfg = validate({"env": {"id": "interplay.envs.toy:shifting_crowd", "num_envs": 2,
                            "vectorization": "async", "num_workers": 1, "step_timeout_s": 5,
                            "max_restarts": 0, "max_failures": 2}})
    env, copies = make_vec_env(cfg)
    try:
        assert isinstance(env, AsyncVecEnv) and copies is None
        assert (env.step_timeout_s, env.max_restarts, env.max_failures) == (5, 0, 2)
        assert len(env.worker_pids()) == 1 and not env.raw_obs
    finally:
        env.close()


def always_one(obs, agent):
    return 1


def test_training_on_async_copies_reports_what_sync_reports(tmp_path):
    overrides = [
        "env.id=interplay.envs.toy:shifting_crowd", "train.steps=100", "log.every=20",
        *QUIET, "env.num_envs=3", "policies.a.type=scripted",
        f"policies.a.fn={__name__}:always_one",
    ]
    rows = {}
    for kind in ("sync", "async"):
        train(load([], [*overrides, f"env.vectorization={kind}", "env.num_workers=2"]),
              tmp_path / kind)
        rows[kind] = [{k: v for k, v in r.items() if not k.endswith("_s")}  # timings differ
                      for r in read_metrics(tmp_path / kind)]
    assert rows["async"] == rows["sync"] and any(r["episodes_in_report"] for r in rows["sync"])


def test_masks_follow_the_env_from_step_to_step():
    box, choice = spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(3)
    buf = StepBuffers(["a"], {"a": obs_view(box, "a")}, {"a": action_view(choice, "a")}, 2)
    o = np.zeros(2, np.float32)
    seen = []
    for info in ({"action_mask": [1, 0, 1]}, {}, {"action_mask": [0, 1, 0]}, {"action_mask": None}):
        buf.clear_step()
        buf.write_acting(1, CopyStep({"a": o}, {"a": info}))
        seen.append(buf.mask["a"][1].tolist())
    assert seen == [[True, False, True], [True] * 3, [False, True, False], [True] * 3]
    assert buf.mask["a"][0].all()  # the other copy untouched
    buf.write_acting(1, CopyStep({"a": o}, {"a": {"action_mask": [0, 0, 1]}}))
    buf.clear_step()
    buf.write_outcome(1, CopyStep({}, {}, {"a": 1.5}, terminated={"a": None}))
    assert buf.terminated[1, 0] and buf.reward[1, 0] == 1.5
    assert buf.final_mask["a"][1].tolist() == [False, False, True]  # the one it last acted on
    with pytest.raises(ValueError, match="action_mask has 2 entries"):
        buf.write_acting(0, CopyStep({"a": o}, {"a": {"action_mask": [1, 0]}}))


@pytest.mark.parametrize("env_id,max_steps", [
    ("mpe2.simple_spread_v3", 25),
    ("pettingzoo.classic.connect_four_v3", None),
    ("interplay.envs.toy:shifting_crowd", None),
    (lambda: vanishing(leave=2, length=5), None),
    (lambda: flaky_counter(p=0.1, reset_p=0.1), None),
])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_what_a_step_promises_holds(env_id, max_steps, kind):
    """``flagged`` False, ``all_legal`` and ``all_acting`` are shortcuts the runner trusts."""
    make = env_id if callable(env_id) else env_factory(env_id)
    env = (SyncVecEnv(make, 3, max_steps, max_failures=10) if kind == "sync" else
           AsyncVecEnv(make, 3, max_steps, num_workers=2, max_failures=10, step_timeout_s=20))
    made = defaultdict(int)
    try:
        step = env.reset(3)
        rng = np.random.default_rng(3)
        for t in range(80):
            step = env.step(random_actions(env, step, rng))
            if not step.flagged:
                made["unflagged"] += 1
                for name in ("terminated", "truncated", "episode_end", "dropped"):
                    assert not getattr(step, name).any(), f"step {t}: {name} set, flagged False"
            if step.all_legal:
                made["all_legal"] += 1
                assert all(m is None or m.all() for m in step.mask.values()), f"step {t}: mask"
            if step.all_acting:
                made["all_acting"] += 1
                assert step.acting.all(), f"step {t}: acting"
    finally:
        env.close()
    if kind == "sync" and env_id == "mpe2.simple_spread_v3":  # what the shortcuts are for
        assert made["all_legal"] == made["all_acting"] == 80 and made["unflagged"] >= 70
    if "connect_four" in str(env_id):  # masks and turns: nothing of the kind may be promised
        assert made["all_legal"] == made["all_acting"] == 0


def test_random_policies_act_the_same_whether_or_not_the_env_promises_all_legal():
    """The sync env promises all-legal masks (the policy is handed none); the async one does
    not: a seeded random policy must still draw the same actions in both."""
    actions = {}
    for kind in ("sync", "async"):
        runner = make_runner({"env": {"id": "mpe2.simple_spread_v3", "num_envs": 2,
                                      "vectorization": kind, "num_workers": 2}})
        try:
            runner.reset(5)
            got = []
            for _ in range(30):
                got += [t.action for t in runner.step().values()]
        finally:
            runner.env.close()
        actions[kind] = np.concatenate(got)
    assert len(actions["sync"]) > 0
    np.testing.assert_array_equal(actions["async"], actions["sync"])


def test_a_worker_waits_on_its_doorbell_no_longer_than_told_and_clears_it():
    bells = np.zeros(3, np.uint8)
    start = time.perf_counter()
    _await_bell(bells, 1, 0.02)  # nobody rings: back after the watch
    assert 0.02 <= time.perf_counter() - start < 5
    bells[1] = 1
    start = time.perf_counter()
    _await_bell(bells, 1, 30.0)  # rung already: back at once, the bell cleared
    assert time.perf_counter() - start < 5 and not bells.any()
    with pytest.raises(ValueError, match="spin_s must be at least 0, got -1"):
        AsyncVecEnv(flaky_counter, 1, spin_s=-1)


def test_a_snapshot_without_the_step_counts_is_counted_again_on_restore():
    """Snapshots taken before the buffers counted acting agents and masked rows still resume
    with what a step promises matching the rows."""
    from interplay.envs.snapshot import OBJ, capture, restore

    make = lambda: vanishing(leave=2, length=5)  # noqa: E731
    env = SyncVecEnv(make, 2)
    step = env.reset(0)
    rng = np.random.default_rng(0)
    for _ in range(3):  # a_1 has left both copies
        step = env.step(random_actions(env, step, rng))
    assert not step.acting.all()
    snap = capture(env)
    buffers = snap[OBJ]["_buf"][OBJ]
    del buffers["_n_acting"], buffers["_n_masked"]
    fresh = SyncVecEnv(make, 2)
    fresh.reset(0)
    assert fresh.current_step().all_acting  # as its own reset left it
    restore(fresh, snap)
    fresh.restored()
    got = fresh.current_step()
    np.testing.assert_array_equal(got.acting, step.acting)
    assert not got.all_acting and got.all_legal == step.all_legal


def test_an_all_legal_draw_needs_its_shape():
    from interplay.run.actors import masked_uniform

    rng = np.random.default_rng(0)
    assert masked_uniform(rng, None, (4, 3)).shape == (4,)
    with pytest.raises(ValueError, match="give a mask or, for all actions legal, a shape"):
        masked_uniform(rng, None)

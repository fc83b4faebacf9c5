"""QMIX's mixer on the env's global state (``algo.state``): what the envs keep, what the joint
rows store, what the mixer reads, what is refused, exact resume."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import read_metrics, straight_and_resumed

from interplay.config.loading import load
from interplay.envs.adapters import EnvContractError
from interplay.envs.async_vec import AsyncVecEnv
from interplay.envs.toy import HiddenGoal
from interplay.envs.vector import SyncVecEnv
from interplay.errors import ConfigError
from interplay.experiment.loop import Experiment, resume, train

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
FAST = ["algo.learning_starts=100", "algo.batch_size=16", "algo.train_every=4"]
GOAL = "env.id=interplay.envs.toy:hidden_goal"


def qmix(*extra: str) -> list[str]:
    return ["algo.name=qmix", *QUIET, *FAST, *extra]


def the_qmix(exp: Experiment):
    (algo, _), = exp.algo.parts
    return algo


def test_the_stored_rows_hold_the_envs_state_and_the_mixer_reads_it(tmp_path):
    exp = Experiment(load([], qmix(GOAL, "env.num_envs=2", "train.steps=300",
                                   "train.test_frequency=-1")), tmp_path / "run")
    algo = the_qmix(exp)
    assert algo.env_state is not None and algo.state_dim == 5  # [episode, t, goal, cell, cell]
    seen: list[np.ndarray] = []  # the states the online mixer read (of sampled rows)
    seen_next: list[np.ndarray] = []  # and the target mixer (after them)
    algo.mixer.register_forward_hook(lambda m, args, out: seen.append(args[1].numpy().copy()))
    algo.target_mixer.register_forward_hook(
        lambda m, args, out: seen_next.append(args[1].numpy().copy()))
    try:
        exp.run()
        buffer = exp.storage.buffer
        n = len(buffer)
        state, nxt = buffer.states["state"][:n], buffer.states["next_state"][:n]
        cells = buffer.columns["agent"]["obs"][:n, :, 0]
        next_cells = buffer.columns["agent"]["next_obs"][:n, :, 0]
        ended = buffer.columns["agent"]["terminated"][:n].all(axis=1)
    finally:
        exp.close()
    assert n == 300 and ended.sum() == 300 // 6
    # each row's state is the env's at the row's observations, its next state the env's at the
    # next observations: the same episode and goal one step on, the final one where it ended
    assert np.array_equal(state[:, 3:], cells) and np.array_equal(nxt[:, 3:], next_cells)
    assert np.array_equal(nxt[:, :1], state[:, :1]) and np.array_equal(nxt[:, 2], state[:, 2])
    assert np.array_equal(nxt[:, 1], state[:, 1] + 1)
    assert np.array_equal(ended, nxt[:, 1] == 6)
    # the goal is in no observation, and it changes between episodes
    assert len(np.unique(state[:, 2])) > 1
    # what the mixer read is the stored states (of sampled rows, and next states of targets)
    assert seen and len(seen) == len(seen_next)
    assert all(batch.shape[1] == 5 for batch in seen + seen_next)
    assert all(tuple(r) in {tuple(x) for x in state} for batch in seen for r in batch)
    assert all(tuple(r) in {tuple(x) for x in nxt} for batch in seen_next for r in batch)
    finals = {tuple(x) for x in nxt[ended]}
    assert any(tuple(r) in finals for batch in seen_next for r in batch)


@pytest.mark.parametrize(("extra", "env_state", "dim"), [
    ([GOAL], True, 5),
    ([GOAL, "env.kwargs={with_state: false}"], False, 2),  # no state(): the 2 observations
    ([GOAL, "env.kwargs={flat_state: false}"], False, 2),  # an image-like state: not auto
    ([GOAL, "algo.state=observations"], False, 2),
    ([GOAL, "env.kwargs={flat_state: false}", "algo.state=env"], True, 5),
    (["env.id=spread"], False, 3 * 18),  # the built-in batched spread keeps no state
])
def test_auto_picks_the_envs_state_where_there_is_one(tmp_path, extra, env_state, dim):
    exp = Experiment(load([], qmix(*extra)), tmp_path / "run")
    try:
        algo = the_qmix(exp)
        assert (algo.env_state is not None) is env_state
        assert algo.state_dim == dim and algo.mixer.b1.in_features == dim
        assert (exp.env.current_step().state is not None) is env_state
    finally:
        exp.close()


def test_the_mpe2_spread_state_is_the_envs(tmp_path):
    exp = Experiment(load([], qmix("env.id=mpe2.simple_spread_v3")), tmp_path / "run")
    try:
        assert the_qmix(exp).state_dim == 54  # its state_space, not the observations (3 x 18)
    finally:
        exp.close()


class CountingEnv(HiddenGoal):
    steps = 0

    def step(self, actions):
        CountingEnv.steps += 1
        return super().step(actions)


@pytest.mark.parametrize(("extra", "message"), [
    (["env.id=tests_counting", "env.kwargs={with_state: false}"],
     r"algo.state is env .* env 'tests_counting' has none to give: it declares no state_space"),
    (["env.id=spread"], r"algo.state is env .* env 'spread' has none to give: it is one of the "
                        "built-in batched envs"),
    (["env.id=tests_counting", "env.kwargs={with_state: false}", "env.vectorization=async",
      "env.num_workers=1"], "algo.state is env .* declares no state_space"),
])
def test_state_env_is_refused_before_any_step_for_an_env_without_one(tmp_path, extra, message):
    from interplay import register_env

    register_env("tests_counting", CountingEnv)
    CountingEnv.steps = 0
    with pytest.raises(ConfigError, match=message):
        Experiment(load([], qmix("algo.state=env", *extra)), tmp_path / "run")
    assert CountingEnv.steps == 0 and not (tmp_path / "run" / "metrics.jsonl").exists()


def test_a_state_that_does_not_fit_its_space_is_named(tmp_path):
    class Wrong(HiddenGoal):
        def state(self):
            return np.zeros(3, np.float32)

    vec = SyncVecEnv(Wrong, 1, state="auto")
    with pytest.raises(EnvContractError, match=r"env hidden_goal: state\(\) gave an array of "
                                               r"shape \(3,\).* holds 5 numbers"):
        vec.reset(0)
    vec.close()


def test_async_copies_keep_the_state_as_in_process_ones_do():
    make = HiddenGoal
    sync = SyncVecEnv(make, 3, state="auto")
    with AsyncVecEnv(make, 3, num_workers=2, state="auto") as par:
        a, b = sync.reset(7), par.reset(7)
        assert np.array_equal(a.state, b.state)
        rng = np.random.default_rng(0)
        finals = 0
        for _ in range(14):
            actions = {ag: rng.integers(3, size=3) for ag in sync.agents}
            a, b = sync.step(actions), par.step(actions)
            assert np.array_equal(a.state, b.state)
            if a.episode_end.any():
                finals += 1
                assert np.array_equal(a.final_state[a.episode_end], b.final_state[b.episode_end])
                assert (a.final_state[a.episode_end, 1] == 6).all()
                assert (a.state[a.episode_end, 1] == 0).all()
        assert finals == 2
    sync.close()


def test_qmix_on_the_envs_state_resumes_exactly(tmp_path):
    common = qmix(GOAL, "env.num_envs=2", "log.every=100", "train.test_frequency=150",
                  "train.test_episodes=2")
    a, b = straight_and_resumed(common, 600, tmp_path)
    assert a == b and any("loss" in r for r in a)


def test_a_checkpoint_of_an_observation_mixer_is_not_resumed_on_the_envs_state(tmp_path):
    train(load([], qmix(GOAL, "algo.state=observations", "train.steps=200",
                        "train.test_frequency=-1")), tmp_path / "run")
    with pytest.raises(ConfigError, match="algo.state"):
        resume(tmp_path / "run", ["train.steps=400", "algo.state=auto"])


def test_qmix_trains_on_mpe2_spread_with_its_state_without_nan(tmp_path):
    train(load([], qmix("env.id=mpe2.simple_spread_v3", "env.num_envs=2", "train.steps=400",
                        "log.every=100", "train.test_frequency=-1")), tmp_path / "run")
    rows = [r for r in read_metrics(tmp_path / "run") if "loss" in r]
    assert rows and all(np.isfinite(r["loss"]) and np.isfinite(r["q_tot_mean"]) for r in rows)


def test_on_mpe2_spread_the_envs_state_and_the_observations_train_alike(tmp_path):
    # mpe2's simple_spread state() is its agents' observations joined, in agent order: mixing
    # on either must learn the very same numbers, final states of episodes included
    common = qmix("env.id=mpe2.simple_spread_v3", "env.num_envs=2", "train.steps=300",
                  "log.every=50", "train.test_frequency=-1", "algo.train_every=2")
    train(load([], [*common, "algo.state=env"]), tmp_path / "env")
    train(load([], [*common, "algo.state=observations"]), tmp_path / "obs")
    skip = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}
    a = [{k: v for k, v in r.items() if k not in skip} for r in read_metrics(tmp_path / "env")]
    b = [{k: v for k, v in r.items() if k not in skip} for r in read_metrics(tmp_path / "obs")]
    assert a == b and sum("loss" in r for r in a) >= 3

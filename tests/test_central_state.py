"""Centralised critics on the env's global state (``algo.state``) for MADDPG, MATD3 and MASAC,
and the state kept once per (tick, copy) however many agents share it: in joint replay rows,
in MAPPO's rollouts, in checkpoints, from in-process, subprocess and Ray env copies.

``HiddenGoal``'s state is ``[episode, t, goal, cell of each agent]`` and agent j observes only
its own cell, so a stored state can be checked against the observations stored beside it.
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from helpers import read_metrics, straight_and_resumed

from interplay.config.loading import load
from interplay.envs.toy import HiddenGoal, Move, ScriptedTurnGame
from interplay.errors import ConfigError
from interplay.experiment.loop import Experiment, resume, train

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false",
         "train.test_frequency=-1", "train.device=cpu"]
GOAL = "env.id=interplay.envs.toy:hidden_goal"
SPREAD = "env.id=mpe2.simple_spread_v3"
FAST = {  # learning from the first hundred steps, on small batches
    "maddpg": ["algo.learning_starts=48", "algo.batch_size=16"],
    "matd3": ["algo.learning_starts=48", "algo.batch_size=16"],
    "masac": ["algo.learning_starts=48", "algo.batch_size=16"],
}


def central(algo: str, *extra: str) -> list[str]:
    return [f"algo.name={algo}", *FAST[algo], *QUIET, *extra]


def the_algorithm(exp: Experiment):
    (algo, _), = exp.algo.parts
    return algo


def critic_width(algo, pid: str) -> int:
    first = next(m for m in algo.policies[pid].critics[0].modules() if hasattr(m, "in_features"))
    return first.in_features


def stored_states(buffer) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n = len(buffer)
    cols = buffer.columns["agent"]
    return (buffer.states["state"][:n], buffer.states["next_state"][:n],
            cols["obs"][:n, :, 0], cols["next_obs"][:n, :, 0])


# -- what the critics read ------------------------------------------------------------------------
@pytest.mark.parametrize("algo", ["maddpg", "matd3", "masac"])
def test_the_critics_read_the_envs_state_in_place_of_the_joined_observations(tmp_path, algo):
    widths = {}
    for state in ("env", "observations"):
        exp = Experiment(load([], central(algo, GOAL, f"algo.state={state}", "env.num_envs=2",
                                          "train.steps=96")), tmp_path / state)
        try:
            a = the_algorithm(exp)
            seen: list[np.ndarray] = []
            a.policies["agent"].critics[0].register_forward_hook(
                lambda m, args, out, seen=seen: seen.append(args[0].detach().numpy().copy()))
            result = exp.run()
            widths[state] = critic_width(a, "agent")
            state_dim = exp.storage.buffer.state_dim
        finally:
            exp.close()
        assert any("critic_loss/agent" in r for r in result.rows)
        assert seen and all(x.shape[-1] == widths[state] for x in seen)
        if state == "env":
            assert a.env_state is not None and state_dim == 5
            # the joint part holds states the env gave: their step counts 0..5, their cells
            # those of the agents (columns 3 and 4 of the state, 1 + 3 + 2 in)
            joint = np.concatenate([x.reshape(-1, x.shape[-1]) for x in seen])[:, 6:11]
            assert set(np.unique(joint[:, 1])) <= set(range(7))
            assert set(np.unique(joint[:, 3:])) <= set(range(5))
        else:
            assert a.env_state is None and state_dim == 0
    # own cell 1 + own action 3 + slot 2 + (state 5 | two cells 2) + both agents' actions 6
    assert widths == {"env": 1 + 3 + 2 + 5 + 6, "observations": 1 + 3 + 2 + 2 + 6}


@pytest.mark.parametrize("algo", ["maddpg", "masac"])
def test_on_mpe2_spread_the_critics_read_its_state(tmp_path, algo):
    result = train(load([], central(algo, SPREAD, "algo.state=env", "env.num_envs=2",
                                    "train.steps=120", "log.every=60")), tmp_path / "run")
    rows = [r for r in result.rows if "critic_loss/agent" in r]
    assert rows and all(np.isfinite(r["critic_loss/agent"]) for r in rows)
    exp = Experiment(load([], central(algo, SPREAD, "algo.state=env")), tmp_path / "built")
    try:
        # own observation 18 + own action 5 + slot 3 + the state 54 + three agents' actions 15
        assert critic_width(the_algorithm(exp), "agent") == 18 + 5 + 3 + 54 + 15
    finally:
        exp.close()


@pytest.mark.parametrize(("extra", "env_state"), [
    ([GOAL], True),
    ([GOAL, "env.kwargs={flat_state: false}"], False),  # an image-like state: not auto
    ([GOAL, "env.kwargs={with_state: false}"], False),
    (["env.id=spread"], False),  # the built-in batched envs keep none
])
def test_auto_takes_the_envs_flat_state_where_there_is_one(tmp_path, extra, env_state):
    exp = Experiment(load([], central("masac", "algo.state=auto", *extra)), tmp_path / "run")
    try:
        assert (the_algorithm(exp).env_state is not None) is env_state
        assert (exp.env.current_step().state is not None) is env_state
    finally:
        exp.close()


def test_the_default_keeps_the_joined_observations(tmp_path):
    for algo in ("maddpg", "matd3", "masac"):
        exp = Experiment(load([], central(algo, GOAL)), tmp_path / algo)
        try:
            assert the_algorithm(exp).env_state is None and exp.env.current_step().state is None
        finally:
            exp.close()


class CountingEnv(HiddenGoal):
    steps = 0

    def step(self, actions):
        CountingEnv.steps += 1
        return super().step(actions)


@pytest.mark.parametrize("algo", ["maddpg", "matd3", "masac"])
@pytest.mark.parametrize(("extra", "message"), [
    (["env.id=tests_counting_state", "env.kwargs={with_state: false}"],
     r"algo.state is env .* env 'tests_counting_state' has none to give: it declares no "
     "state_space"),
    (["env.id=spread"], r"algo.state is env .* env 'spread' has none to give: it is one of the "
                        "built-in batched envs"),
])
def test_state_env_is_refused_before_any_step_for_an_env_without_one(tmp_path, algo, extra,
                                                                     message):
    from interplay import register_env

    register_env("tests_counting_state", CountingEnv)
    CountingEnv.steps = 0
    with pytest.raises(ConfigError, match=message):
        Experiment(load([], central(algo, "algo.state=env", *extra)), tmp_path / "run")
    assert CountingEnv.steps == 0 and not (tmp_path / "run" / "metrics.jsonl").exists()


def test_the_algorithm_itself_refuses_env_without_a_state_space():
    from interplay.algos.maddpg import MADDPG
    from interplay.algos.sac import MASAC
    from interplay.config.validation import validate
    from interplay.experiment.build import make_specs, make_vec_env

    cfg = validate(load([], [GOAL, "algo.name=masac"]).model_dump())
    env, _ = make_vec_env(cfg)
    specs = make_specs(cfg, env)
    env.close()
    for cls in (MADDPG, MASAC):
        settings = cls.Settings(name=cls.name, state="env")
        with pytest.raises(ConfigError, match="algo.state is env .* the env keeps none"):
            cls(settings, specs, "cpu", 0)


# -- stored once per (tick, copy) -----------------------------------------------------------------
@pytest.mark.parametrize("extra", [[], ["env.vectorization=async", "env.num_workers=2"]])
@pytest.mark.parametrize("algo", ["maddpg", "masac"])
def test_each_joint_row_keeps_the_state_once_and_it_is_the_envs(tmp_path, algo, extra):
    no_learning = "algo.learning_starts=1000"
    exp = Experiment(load([], central(algo, GOAL, "algo.state=env", "env.num_envs=3",
                                      "env.kwargs={n_agents: 4}", "train.steps=150",
                                      "algo.buffer_size=32", no_learning, *extra)),
                     tmp_path / "run")
    try:
        exp.run()
        buffer = exp.storage.buffer
        state, nxt, cells, next_cells = stored_states(buffer)
        held = {key: col.nbytes for key, col in buffer.states.items()}
    finally:
        exp.close()
    # one state (and one next state) of 3 + 4 numbers per row, not one per agent of the row
    assert held == {"state": 32 * 7 * 4, "next_state": 32 * 7 * 4}
    assert len(state) == 32
    assert np.array_equal(state[:, 3:], cells) and np.array_equal(nxt[:, 3:], next_cells)
    assert np.array_equal(nxt[:, 1], state[:, 1] + 1) and len(np.unique(state[:, 2])) > 1


def mappo(*extra: str) -> list[str]:
    return [GOAL, "algo.name=mappo", "algo.state=env", "algo.epochs=1", *QUIET, *extra]


def check_rollout(r, agents: int) -> None:
    """Each cell's states are the env's when the agent acted and after: its own cell there."""
    at = np.nonzero(r.valid)
    state, nxt = r.states[r.state[at]], r.states[r.next_state[at]]
    assert np.array_equal(state[np.arange(len(state)), 3 + at[2]], r.obs[at][:, 0])
    assert np.array_equal(nxt[np.arange(len(nxt)), 3 + at[2]], r.next_obs[at][:, 0])
    assert np.array_equal(nxt[:, 1], state[:, 1] + 1)
    assert r.states.shape[1] == 3 + agents


@pytest.mark.parametrize("agents", [2, 6])
def test_a_mappo_rollout_keeps_one_state_per_tick_and_copy_whatever_the_agents(tmp_path, agents):
    # 4 copies, 12 steps (no update yet): states seen at 12 ticks, plus the final state of
    # the two episodes (of 6 steps) each copy ended
    exp = Experiment(load([], mappo("env.num_envs=4", "algo.rollout=16", "train.steps=48",
                                    f"env.kwargs={{n_agents: {agents}}}")), tmp_path / "run")
    try:
        exp.run()
        r = exp.storage.rollout("agent")
        table = exp.storage.states
    finally:
        exp.close()
    assert r is not None and r.valid.shape == (12, 4, agents) and r.valid.all()
    check_rollout(r, agents)
    assert table.size == 4 * (12 + 2)
    assert table.nbytes == 4 * (12 + 2) * (3 + agents) * 4  # E·(T + ends)·D floats, not ·k


def test_the_runner_hands_each_copys_state_once_per_step(tmp_path):
    exp = Experiment(load([], mappo("env.num_envs=3", "env.kwargs={n_agents: 5}",
                                    "algo.rollout=8", "train.batch_mode=truncate_episodes")),
                     tmp_path / "run")
    try:
        exp.runner.reset(0)
        for _ in range(8):
            out = exp.runner.step()
            for t in out.values():
                assert t.states is not None and len(t) == 3 * 5
                assert len(t.states) <= 2 * 3  # at the observations and after, per copy
                assert len(np.unique(t.state_keys, axis=0)) == len(t.states)
    finally:
        exp.close()


def test_mappo_on_the_envs_state_resumes_exactly(tmp_path):
    # the split falls inside a rollout: its table of states goes through the checkpoint
    common = mappo("env.num_envs=2", "algo.rollout=20", "log.every=40", "train.seed=1",
                   "train.batch_mode=truncate_episodes")
    a, b = straight_and_resumed(common, 120, tmp_path)
    assert a == b and any("value_loss/agent" in r for r in a)


def test_mappo_holding_whole_episodes_resumes_exactly(tmp_path):
    common = mappo("env.num_envs=2", "algo.rollout=10", "log.every=40", "train.seed=2",
                   "env.kwargs={length: 9}")
    a, b = straight_and_resumed(common, 100, tmp_path)
    assert a == b and any("value_loss/agent" in r for r in a)


@pytest.mark.parametrize("algo", ["maddpg", "masac"])
def test_central_critics_on_the_envs_state_resume_exactly(tmp_path, algo):
    common = central(algo, GOAL, "algo.state=env", "env.num_envs=2", "log.every=40")
    a, b = straight_and_resumed(common, 120, tmp_path)
    assert a == b and any("critic_loss/agent" in r for r in a)


def test_a_checkpoint_of_observation_critics_is_not_resumed_on_the_envs_state(tmp_path):
    train(load([], central("maddpg", GOAL, "algo.state=observations", "train.steps=100")),
          tmp_path / "run")
    with pytest.raises(ConfigError, match="algo.state"):
        resume(tmp_path / "run", ["train.steps=200", "algo.state=env"])
    assert len([r for r in read_metrics(tmp_path / "run") if r["phase"] == "train"]) >= 1


@pytest.mark.slow  # starts a local Ray: most of a minute on a busy machine
def test_mappo_rollouts_from_ray_runners_keep_one_state_per_tick_and_copy(tmp_path):
    pytest.importorskip("ray")
    from interplay.backends.ray.cluster import connect, disconnect
    from interplay.config.schema import BackendConfig

    started = connect(BackendConfig(name="ray"), num_cpus=2)
    try:
        exp = Experiment(load([], mappo("env.num_envs=2", "algo.rollout=16", "train.steps=24",
                                        "backend.name=ray", "backend.num_env_runners=2",
                                        "env.kwargs={n_agents: 3}")), tmp_path / "run")
        try:
            exp.run()
            r = exp.storage.rollout("agent")
            table = exp.storage.states
        finally:
            exp.close()
    finally:
        disconnect(started)
    copies = r.valid.shape[1]
    assert r.valid.all() and copies == 4  # two runners of two copies, renumbered
    check_rollout(r, 3)
    assert table.size == copies * (r.valid.shape[0] + 1)  # 6 steps: one episode ended


def test_a_recurrent_mappo_keeps_its_own_state_beside_the_envs(tmp_path):
    # the actor's recurrent state rides with each action, the env's state in the table
    exp = Experiment(load([], mappo("env.num_envs=2", "algo.rollout=12", "train.steps=20",
                                    "algo.model.recurrent=gru", "algo.model.recurrent_size=4")),
                     tmp_path / "run")
    try:
        exp.run()
        r = exp.storage.rollout("agent")
        assert r.extras["state"].shape[-1] == 4
        check_rollout(r, 2)
        metrics = the_algorithm(exp).update(exp.storage)  # sequences start from the actor's states
    finally:
        exp.close()
    assert np.isfinite(metrics["value_loss/agent"])


class TurnsWithState(ScriptedTurnGame):
    """Three players in turn, 7 moves an episode; the state counts the moves and episodes."""

    def __init__(self):
        super().__init__(n_agents=3, plan=[Move()] * 7)
        self.state_space = spaces.Box(-1.0, 1e6, (2,), np.float32)
        self.episode = -1

    def reset(self, seed=None, options=None):
        self.episode += 1
        super().reset(seed, options)

    def state(self):
        return np.array([self.moves, self.episode], np.float32)


def test_in_a_turn_based_env_each_row_keeps_the_state_its_agent_acted_in(tmp_path):
    from interplay import register_env

    register_env("tests_turns_with_state", TurnsWithState)
    exp = Experiment(load([], [
        "env.id=tests_turns_with_state", "algo.name=mappo", "algo.state=env", *QUIET,
        "env.num_envs=2", "algo.rollout=64", "train.steps=40"]), tmp_path / "run")
    try:
        exp.run()
        r = exp.storage.rollout("player")
        table = exp.storage.states
    finally:
        exp.close()
    at = np.nonzero(r.valid)
    state, nxt = r.states[r.state[at]], r.states[r.next_state[at]]
    obs, next_obs = r.obs[at], r.next_obs[at]
    assert len(obs) > 6
    # the state when the agent acted holds the moves it saw, and so does the one at its next turn
    assert np.array_equal(state[:, 0], obs[:, 0]) and np.array_equal(nxt[:, 0], next_obs[:, 0])
    assert (nxt[:, 0] > state[:, 0]).all() and np.array_equal(nxt[:, 1], state[:, 1])
    # one state per move of a copy (and final ones), not one per row naming it
    assert table.size == len(np.unique(table.keys[:table.size], axis=0)) < 2 * len(obs)


def _rows_carry_their_states(part: dict, rows: np.ndarray | None = None) -> dict:
    """A saved batch of transitions as checkpoints kept it before the table of states: each
    row's state and next state in its ``extras``."""
    table = part["states"] if rows is None else rows
    extras = {**part["extras"], "state": table[part["state"]],
              "next_state": table[part["next_state"]]}
    return {**part, "extras": extras, "state": None, "next_state": None, "states": None,
            "state_keys": None}


def test_a_checkpoint_that_kept_a_state_per_row_resumes_exactly(tmp_path):
    from interplay.experiment.run_store.checkpoint import (
        list_checkpoints,
        load_checkpoint,
        save_checkpoint,
    )

    # stopped inside an episode (9 steps) and inside a rollout (16 steps): held transitions
    # and a part-filled rollout both carry states
    common = mappo("env.num_envs=2", "algo.rollout=16", "log.every=40", "train.seed=4",
                   "env.kwargs={length: 9}")
    a, _ = straight_and_resumed(common, 100, tmp_path)
    folder = list_checkpoints(tmp_path / "split")[0]
    state, _ = load_checkpoint(folder)
    runner, storage = state["runner"], state["storage"]
    del runner["states"]
    held = 0
    for entry in runner["groups"].values():
        entry["book"]["at"] = None
        held += len(entry["held"])
        entry["held"] = [_rows_carry_their_states(t) for t in entry["held"]]
    table = storage.pop("states")
    storage["parts"] = {pid: [_rows_carry_their_states(t, table["rows"]) for t in parts]
                        for pid, parts in storage["parts"].items()}
    assert held and any(storage["parts"].values())
    old = tmp_path / "old"
    train(load([], [*common, "train.steps=50"]), old)
    for stale in list_checkpoints(old):
        __import__("shutil").rmtree(stale)
    save_checkpoint(old, 50, state)
    resume(old, ["train.steps=100"])
    skip = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}
    assert [{k: v for k, v in r.items() if k not in skip} for r in read_metrics(old)] == a

"""Shared helpers: reference loops that compute exact returns the plain PettingZoo way."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from interplay.config.loading import load
from interplay.config.schema import Config
from interplay.config.validation import validate
from interplay.envs.toy import Move, ScriptedTurnGame
from interplay.experiment.build import make_specs, make_vec_env
from interplay.run.actors import RandomActor
from interplay.run.runner import Runner
from interplay.seeding import rng_for


def aec_returns(env, seed: int, policy, episodes: int = 1) -> list[dict[str, float]]:
    """Per-episode returns from the standard ``agent_iter``/``last`` loop."""
    out = []
    for ep in range(episodes):
        env.reset(seed=seed if ep == 0 else None)
        total: dict[str, float] = defaultdict(float)
        for agent in env.agent_iter():
            obs, rew, term, trunc, _ = env.last()
            total[agent] += rew
            env.step(None if term or trunc else policy(obs, agent))
        out.append(dict(total))
    return out


def parallel_returns(env, seed: int, policy, episodes: int = 1) -> list[dict[str, float]]:
    """Per-episode returns from a plain Parallel loop."""
    out = []
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed if ep == 0 else None)
        total: dict[str, float] = defaultdict(float)
        while env.agents:
            obs, rew, *_ = env.step({a: policy(obs[a], a) for a in env.agents})
            for a, r in rew.items():
                total[a] += r
        out.append(dict(total))
    return out


QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
"""Overrides for a run whose progress bar, TensorBoard files and ``curve.png`` no test reads:
drawing the curve alone costs about a second a run."""
QUIET_LOG = {"console": False, "tensorboard": False, "curve": False}
"""The ``log`` section of :data:`QUIET`, for configs given as dicts."""
CLI_QUIET = [arg for setting in QUIET for arg in ("-s", setting)]
""":data:`QUIET` as ``interplay train`` arguments."""


def tiny_cfg(*overrides: str, files: tuple[str | Path, ...] = ()) -> Config:
    """The config of a short test run: ``files`` and ``overrides`` as ``interplay train`` takes
    them, with :data:`QUIET` first, so a test that reads TensorBoard or the curve turns it on."""
    return load(list(files), [*QUIET, *overrides])


def turn_game() -> ScriptedTurnGame:
    """Three players in rotation with a rotating illegal action, paid on others' turns too; one
    leaves mid-episode, a move skips a player, and the episode is cut at eight moves
    (``env.id: helpers:turn_game``)."""
    plan = [Move(rewards={"player_0": 1.0, "player_2": -0.5}), Move(rewards={"player_1": 2.0}),
            Move(rewards={"player_2": 1.0}, terminate=["player_1"]), Move(skip=1)] * 3
    return ScriptedTurnGame(n_agents=3, plan=plan, truncate_after=8)


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def make_runner(data: dict, collect: bool = True) -> Runner:
    """A runner over the config ``data`` whose trainable policies act randomly and collect."""
    cfg = validate(data)
    env, copies = make_vec_env(cfg)
    specs = make_specs(cfg, env)
    actors = {pid: RandomActor(s, rng_for(cfg.train.seed, pid)) for pid, s in specs.items()}
    return Runner(env, specs, actors, set(specs) if collect else set(), copies=copies)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


class Learner:
    """An algorithm and its storage driven as the training loop drives them.

    ``collect`` stores a step's closed transitions and shows them to the algorithm; ``ready``
    ends the step of the copies (``env_steps``: the run's env steps, by default one more step
    of ``copies`` copies) and asks the algorithm; ``update`` learns from the storage. Its state
    is the algorithm's and the storage's together, as in a checkpoint. Anything else is the
    algorithm's.
    """

    def __init__(self, algo, copies: int = 1):
        self.algo = algo
        self.storage = algo.make_storage(copies)
        self.copies = copies
        self.env_steps = 0

    def __getattr__(self, name):
        return getattr(self.algo, name)

    def __setattr__(self, name, value):
        if name in ("algo", "storage", "copies", "env_steps"):
            object.__setattr__(self, name, value)
        else:
            setattr(self.algo, name, value)

    @property
    def buffer(self):
        return self.storage.buffer

    def collect(self, pid: str, batch) -> None:
        self.storage.add(pid, batch)
        self.algo.collect(pid, batch)

    def ready(self, env_steps: int | None = None) -> bool:
        self.env_steps = self.env_steps + self.copies if env_steps is None else env_steps
        self.storage.end_step(self.env_steps)
        return self.algo.ready(self.storage, self.env_steps)

    def update(self) -> dict[str, float]:
        return self.algo.update(self.storage)

    def state_dict(self) -> dict:
        return {"algo": self.algo.state_dict(), "env_steps": self.env_steps,
                "storage": self.storage.state_dict() if self.storage.saved else None}

    def load_state_dict(self, state: dict) -> None:
        self.algo.load_state_dict(state["algo"])
        self.storage.load_state_dict(state["storage"])
        self.env_steps = state["env_steps"]


TIMING = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}


def straight_and_resumed(overrides: list[str], steps: int, tmp_path: Path
                         ) -> tuple[list[dict], list[dict]]:
    """Metrics rows (timings left out) of a run trained ``steps`` env steps at once, and of
    one stopped halfway and resumed to ``steps``: equal when resume is exact."""
    from interplay.experiment.loop import resume, train

    train(load([], [*overrides, f"train.steps={steps}"]), tmp_path / "straight")
    train(load([], [*overrides, f"train.steps={steps // 2}"]), tmp_path / "split")
    resume(tmp_path / "split", [f"train.steps={steps}"])

    return untimed_metrics(tmp_path / "straight"), untimed_metrics(tmp_path / "split")


def newest_state(run_dir: Path, map_location: str | None = "cpu") -> dict:
    """The state the run's newest checkpoint holds, as saved (its tensors on the devices they were
    saved from when ``map_location`` is None)."""
    import torch

    newest = sorted((Path(run_dir) / "checkpoints").glob("*/state.pt"))[-1]
    return torch.load(newest, map_location=map_location, weights_only=True)


def untimed_metrics(run_dir: Path) -> list[dict]:
    """The run's metrics rows less their timings: what a repeated run must give again."""
    return [{k: v for k, v in r.items() if k not in TIMING} for r in read_metrics(run_dir)]


RAY_ONLY = frozenset({"runner_restarts", "policy_lag", "ray/runners_lost", "ray/episodes_dropped",
                      "ray/sample_wait_s", "ray/learn_s", "ray/sample_share"})
"""What only a Ray run's rows hold (its runners' faults and lag, where the learner's time went)."""


def local_numbers(run_dir: Path) -> list[dict]:
    """The run's untimed metrics less what only a Ray run reports: what one Ray runner must
    give as the local run does."""
    return [{k: v for k, v in r.items() if k not in RAY_ONLY} for r in untimed_metrics(run_dir)]


class StopAfter:
    """A stop request that comes after ``n`` looks (a SIGINT in the middle of a member)."""

    def __init__(self, n: int):
        self.n, self.signum = n, 2

    @property
    def requested(self) -> bool:
        self.n -= 1
        return self.n < 0


def assert_same_state(a: Any, b: Any, where: str = "state") -> None:
    """``a`` and ``b`` (nested dicts, lists and tuples of tensors and plain values) hold the
    same values, tensors bit for bit; ``where`` names the first place they differ."""
    assert type(a) is type(b), where
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same_state(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_state(x, y, f"{where}/{i}")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    else:
        assert a == b, where

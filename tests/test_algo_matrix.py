"""Every registered algorithm, and one a user names as ``module:Class``, on a small env of each
kind: a short run, exact resume, eval and ``load_policy``. A cell is skipped only where the
algorithm declares it cannot train that kind of env, so a new algorithm is tested the moment it
registers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces
from helpers import newest_state, read_metrics, tiny_cfg, untimed_metrics

from interplay import ConfigError, Result, evaluate, load_policy, resume, train
from interplay.algos import REGISTRY, Algorithm, algorithm_class

ALGORITHMS = [*sorted(REGISTRY), "custom_algo:Greedy"]

STEPS = 132
"""Env steps of a straight run. The split run stops at half (66 env steps, 33 steps of the two
copies), inside a rollout of 16 steps, between two learning rounds of :data:`TINY`'s schedule and
inside a report's window; the one test phase comes after it."""

TINY = {"rollout": 16, "epochs": 2, "minibatches": 2, "learning_starts": 20, "train_every": 8,
        "batch_size": 16, "buffer_size": 1000, "target_every": 20, "exploration_steps": 100,
        "n_step": 2, "mixer_hidden": 8, "hypernet_hidden": 8, "model": {"hidden": [16]},
        "critic_model": {"hidden": [16]}}
"""Small settings, each given to the algorithms whose settings have that key: a few hundred steps
update every learner several times on either side of the split."""

RUN = ["env.num_envs=2", "log.every=40", "train.test_frequency=120", "train.test_episodes=1"]


@dataclass(frozen=True)
class EnvKind:
    overrides: tuple[str, ...]
    needs: tuple[str, ...]
    """Capabilities an algorithm must have to train it: an action kind, or a capability
    attribute (see :func:`capable`)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Settings over :data:`TINY` for this kind of env."""


ENVS = {
    "simultaneous_discrete": EnvKind(("env.id=spread",), ("discrete",)),
    # two policies, a speaker and a listener, with spaces of their own
    "continuous": EnvKind(("env.id=speaker_listener", "env.kwargs.continuous_actions=true"),
                          ("box",)),
    "turn_based": EnvKind(("env.id=helpers:turn_game",), ("discrete", "turn_based")),
    "agents_come_and_go": EnvKind(("env.id=interplay.envs.toy:shifting_crowd",),
                                  ("discrete", "agents_come_and_go")),
    # spread again, learned by recurrent networks: their states are carried across steps,
    # checkpoints and load_policy
    "recurrent_networks": EnvKind(("env.id=spread",), ("discrete", "supports_recurrent"),
                                  {"model": {"hidden": [16], "recurrent": "gru",
                                             "recurrent_size": 16, "seq_len": 8}}),
    # small frames, a small CNN, and a couple of updates: convolutions cost the most here
    "images": EnvKind(("env.id=interplay.envs.pixels", "env.kwargs.size=36"), ("discrete",),
                      {"learning_starts": 60, "train_every": 40, "rollout": 30, "epochs": 1,
                       "model": {"hidden": [16], "channels": [4, 8, 8]},
                       "critic_model": {"hidden": [16], "channels": [4, 8, 8]}}),
}
FULLY_CHECKED = [env for env in ENVS if env != "images"]
"""The kinds every check runs on; image frames (the costliest networks) get the short run only:
past the networks, their runs are the same code as the others'."""

CAPABILITY_ATTRS = {"turn_based": "turn_based", "agents_come_and_go": "agents_come_and_go",
                    "supports_recurrent": "supports_recurrent"}
"""The class attribute each capability is declared in, on :class:`interplay.Algorithm`."""


def capable(cls: type[Algorithm], need: str) -> bool:
    """Whether ``cls`` declares it can train an env that needs ``need``."""
    if need not in CAPABILITY_ATTRS:
        return need in cls.action_kinds
    return bool(getattr(cls, CAPABILITY_ATTRS[need]))


def lacking(cls: type[Algorithm], env: str) -> str | None:
    """The capability ``env`` needs that ``cls`` declares it lacks, as a skip's reason."""
    for need in ENVS[env].needs:
        if capable(cls, need) is False:
            declared = (f"{CAPABILITY_ATTRS[need]} = False" if need in CAPABILITY_ATTRS
                        else f"action_kinds = {sorted(cls.action_kinds)}, not {need}")
            return f"{cls.__name__} declares {declared}: it cannot train {env}"
    return None


def assert_same(a: Any, b: Any, where: str = "state") -> None:
    """``a`` and ``b`` hold the same values, tensors bit for bit."""
    assert type(a) is type(b), where
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}/{i}")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    else:
        assert a == b, where


class Cell:
    """One algorithm on one env: its runs, trained when a test first asks for them."""

    def __init__(self, algo: str, env: str, root: Path):
        self.algo, self.env, self.root = algo, env, root
        self.cls = algorithm_class(algo)
        fields = self.cls.Settings.model_fields
        settings = {**TINY, **ENVS[env].settings}
        tiny = [f"algo.{k}={v}" for k, v in settings.items() if k in fields]
        self.overrides = [*ENVS[env].overrides, *RUN, f"algo.name={algo}", *tiny]

    @cached_property
    def straight(self) -> Result:
        return self._train(STEPS, self.root / "straight")

    @cached_property
    def resumed(self) -> Result:
        self._train(STEPS // 2, self.root / "split")
        return resume(self.root / "split", [f"train.steps={STEPS}"])

    def _train(self, steps: int, run_dir: Path) -> Result:
        return train(tiny_cfg(*self.overrides, f"train.steps={steps}"), run_dir)

    @property
    def learns(self) -> bool:
        """Whether the algorithm learns: it documents what its updates report."""
        return bool(self.cls.metric_docs)

    def learned(self, rows: list[dict]) -> set[str]:
        """The metrics in ``rows`` that an update reports (the algorithm's own, less gauges)."""
        own = {name.split("/")[0] for name in self.cls.metric_docs} - self.cls.gauges
        return {k for row in rows for k in row if k.split("/")[0] in own}


def cell_id(cell: tuple[str, str]) -> str:
    return f"{cell[0].split(':')[-1].lower()}-{cell[1]}"


@pytest.fixture(scope="module", params=[(a, e) for a in ALGORITHMS for e in FULLY_CHECKED],
                ids=cell_id)
def cell(request, tmp_path_factory) -> Cell:
    algo, env = request.param
    reason = lacking(algorithm_class(algo), env)
    if reason:
        pytest.skip(reason)
    return Cell(algo, env, tmp_path_factory.mktemp(cell_id(request.param)))


def test_a_short_run_trains_and_reports_finite_numbers(cell):
    check_short_run(cell)


@pytest.mark.parametrize("algo", ALGORITHMS, ids=lambda algo: algo.split(":")[-1].lower())
def test_a_short_run_on_image_observations(algo, tmp_path):
    reason = lacking(algorithm_class(algo), "images")
    if reason:
        pytest.skip(reason)
    check_short_run(Cell(algo, "images", tmp_path))


def check_short_run(cell: Cell) -> None:
    result = cell.straight
    assert result.env_steps == STEPS
    rows = read_metrics(result.run_dir)
    assert {r["phase"] for r in rows} == {"train", "test"}
    for row in rows:
        bad = {k: v for k, v in row.items() if isinstance(v, float) and not math.isfinite(v)}
        assert not bad, f"non-finite metrics at {row['env_steps']} env steps: {bad}"
    if cell.learns:
        assert cell.learned(rows), f"{cell.algo} reported no update in {STEPS} env steps"


def test_a_run_stopped_and_resumed_equals_a_straight_one(cell):
    straight, split = cell.straight.run_dir, cell.resumed.run_dir
    assert cell.resumed.env_steps == STEPS
    assert untimed_metrics(split) == untimed_metrics(straight)
    if cell.learns:  # it learned after the resume, or the check proves little
        after = [r for r in read_metrics(split) if r["env_steps"] > STEPS // 2]
        assert cell.learned(after)
    a, b = newest_state(straight), newest_state(split)
    for part in ("algo", "storage", "runner", "rng"):
        assert_same(a[part], b[part], part)


def test_eval_scores_the_trained_policies(cell):
    report = evaluate(cell.straight.run_dir, episodes=2)
    assert report["episodes"] == 2
    assert math.isfinite(report["episode_return_mean"])


def test_load_policy_acts_legally_and_alike_alone_or_batched(cell):
    rows = read_metrics(cell.straight.run_dir)
    pids = sorted({k.split("/")[1] for k in rows[-1] if k.startswith("policy_return_mean/")})
    for pid in pids:
        policy = load_policy(cell.straight.run_dir, pid)
        obs = [observation(policy.observation_space, seed) for seed in range(3)]
        for explore in (False, True):
            one = [policy.act(o, explore=explore) for o in obs]
            batched = policy.act(obs, explore=explore)
            for i, (o, a) in enumerate(zip(obs, one, strict=True)):
                assert policy.action_space.contains(np.asarray(a, policy.action_space.dtype)), a
                if isinstance(o, dict) and "action_mask" in o:
                    assert o["action_mask"][int(a)], f"policy {pid!r} took an illegal action"
                if cell.learns and not explore:  # greedy acting is a function of the observation
                    # (to float rounding: a batch may sum in another order than one row)
                    np.testing.assert_allclose(batched[i], a, rtol=1e-5, atol=1e-6)


def observation(space: spaces.Space, seed: int) -> Any:
    """An observation of ``space``, drawn; a Dict one with an ``action_mask`` gets a mask with
    one illegal action, so that acting legally means something."""
    space.seed(seed)
    obs = space.sample()
    if isinstance(obs, dict) and "action_mask" in obs:
        mask = np.ones_like(obs["action_mask"])
        mask[seed % len(mask)] = 0
        obs["action_mask"] = mask
    return obs


def test_a_learner_of_joint_rows_refuses_agents_that_come_and_go_naming_what_can(tmp_path):
    cfg = tiny_cfg(*ENVS["agents_come_and_go"].overrides, "algo.name=maddpg", "train.steps=60")
    with pytest.raises(ConfigError, match="use ippo or mappo"):
        train(cfg, tmp_path)

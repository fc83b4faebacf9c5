"""Every registered algorithm, and one a user names as ``module:Class``, on a small env of each
kind: a short run, exact resume, eval and ``load_policy`` (image frames: the short run; Dict or
Tuple actions, Dict observations with image entries and attention critics: all but eval). Where
the algorithm declares it cannot train that kind of env, the cell checks instead that the run is
refused before any step, naming the key or space it cannot take; so a new algorithm is tested
the moment it registers."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from helpers import assert_same_state, newest_state, read_metrics, tiny_cfg, untimed_metrics

from interplay import ConfigError, Result, evaluate, load_policy, resume, train
from interplay.algos import REGISTRY, Algorithm, algorithm_class
from interplay.algos.base import CAPABILITIES
from interplay.envs.composite import from_env, is_composite, legal_in_row
from interplay.envs.spaces import ActionView

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

SMALL_CNN = {"camera": {"channels": [4], "kernels": [2], "strides": [2]}}
"""One small conv layer for :mod:`interplay.envs.toy.color_key`'s 4x4 frames."""

REPORT = 40
"""Env steps between reports; the one test phase is at the last report before a run ends."""
RUN = ["env.num_envs=2", f"log.every={REPORT}", "train.test_episodes=1"]


@dataclass(frozen=True)
class EnvKind:
    overrides: tuple[str, ...]
    needs: tuple[str, ...]
    """Capabilities an algorithm must have to train it: an action kind, or a capability
    attribute (see :func:`capable`)."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Settings over :data:`TINY` for this kind of env, each given to the algorithms whose
    settings have that key."""
    asks: dict[str, Any] = field(default_factory=dict)
    """Settings that ask for a capability this kind needs: given to every algorithm, so that one
    lacking it must refuse them."""
    steps: int = STEPS
    """Env steps of a straight run (:data:`SHORT_STEPS` for the kinds checked on fewer)."""
    evaluated: bool = True
    """Whether ``evaluate`` gets a check of its own here. Its acting is the test phase's (which
    the short run checks) and its loading is ``load_policy``'s: the kinds added last leave it
    out, to keep the matrix quick."""


SHORT_STEPS = 88
SHORT = {"learning_starts": 30, "train_every": 40, "rollout": 20, "epochs": 1}
"""A shorter run's schedule, which keeps the matrix quick where updates cost most (image frames)
or where a kind checks one part over the first kinds' runs: the split, at 44 env steps, falls
inside a rollout of 40 env steps and between two learning rounds (at 30 and 70 env steps, or 40
and 80 for the rollouts); the one test phase (at 80) comes after it."""

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
                                  asks={"model": {"hidden": [16], "recurrent": "gru",
                                                  "recurrent_size": 16, "seq_len": 8}}),
    # composite actions: a Tuple of a masked move and a force, its mask keyed by position (Dict
    # actions with Dict masks: tests/test_dict_actions.py)
    "composite_actions": EnvKind(("env.id=interplay.envs.aim", "env.kwargs.action_form=tuple",
                                  "env.kwargs.mask_form=dict"), ("composite",), SHORT,
                                 steps=SHORT_STEPS, evaluated=False),
    # Dict observations: an RGB frame beside a float vector, each encoded by a network of its own
    "image_entries": EnvKind(("env.id=interplay.envs.color_key", "env.kwargs.size=4",
                              "env.kwargs.max_cycles=10"), ("discrete",),
                             {**SHORT, "model": {"hidden": [16], "encoders": SMALL_CNN},
                              "critic_model": {"hidden": [16], "encoders": SMALL_CNN}},
                             steps=SHORT_STEPS, evaluated=False),
    # a centralised critic (or mixer) attending across the agents, whichever are present
    "attention_critic": EnvKind(("env.id=spread",), ("discrete", "attention_critic"), SHORT,
                                asks={"critic_model": {"type": "attention", "embed": 8,
                                                       "heads": 2, "layers": 1, "hidden": [8]}},
                                steps=SHORT_STEPS, evaluated=False),
    # small frames, a small CNN, and a couple of updates: convolutions cost the most here
    "images": EnvKind(("env.id=interplay.envs.pixels", "env.kwargs.size=36"), ("discrete",),
                      {**SHORT, "model": {"hidden": [16], "channels": [4, 8, 8]},
                       "critic_model": {"hidden": [16], "channels": [4, 8, 8]}},
                      steps=SHORT_STEPS),
}
FULLY_CHECKED = [env for env in ENVS if env != "images"]
"""The kinds every check runs on; image frames (the costliest networks) get the short run only:
past the networks, their runs are the same code as the others'."""

REFUSED = {
    "turn_based": r"algo\.name: .* cannot learn from env .*turn-based",
    # an algorithm without networks has no algo.model key at all
    "supports_recurrent": r"algo\.model(\.recurrent)?: ",
    "attention_critic": r"algo\.critic_model\.type: .* does not take an attention critic",
}
"""What the error refusing each capability attribute says (an action kind's: see
:func:`refusal`). A learner of joint rows stops only at the first step where an agent is missing
(``agents_come_and_go``), so its cells are skipped; the last test here checks that refusal."""


def capable(cls: type[Algorithm], need: str) -> bool:
    """Whether ``cls`` declares it can train an env that needs ``need``: a capability attribute
    (:data:`interplay.algos.base.CAPABILITIES`), or an action kind."""
    if need in CAPABILITIES:
        return bool(getattr(cls, need))
    return need in cls.action_kinds


def missing(cls: type[Algorithm], env: str) -> str | None:
    """The first capability ``env`` needs that ``cls`` declares it lacks."""
    return next((need for need in ENVS[env].needs if not capable(cls, need)), None)


def lacking(cls: type[Algorithm], env: str) -> str | None:
    """The capability ``env`` needs that ``cls`` declares it lacks, as a skip's reason."""
    need = missing(cls, env)
    if need is None:
        return None
    declared = (f"{need} = False" if need in CAPABILITIES
                else f"action_kinds = {sorted(cls.action_kinds)}, not {need}")
    return f"{cls.__name__} declares {declared}: it cannot train {env}"


def refusal(need: str) -> str | None:
    """The error refusing ``need`` before any step, as a pattern; None where the refusal comes
    later."""
    if need in CAPABILITIES:
        return REFUSED.get(need)
    return rf"algo\.name: .* cannot train policy .*: its action space .* is {need}"


class Cell:
    """One algorithm on one env: its runs, trained when a test first asks for them."""

    def __init__(self, algo: str, env: str, root: Path):
        self.algo, self.env, self.root = algo, env, root
        self.cls = algorithm_class(algo)
        self.overrides = overrides(algo, env)
        self.steps = ENVS[env].steps

    @cached_property
    def straight(self) -> Result:
        return self._train(self.steps, self.root / "straight")

    @cached_property
    def resumed(self) -> Result:
        self._train(self.steps // 2, self.root / "split")
        return resume(self.root / "split", [f"train.steps={self.steps}"])

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


def overrides(algo: str, env: str) -> list[str]:
    """The settings of ``algo``'s run on ``env``: :data:`TINY` and the kind's own where the
    algorithm's settings have the key, and what the kind asks for in any case."""
    kind, fields = ENVS[env], algorithm_class(algo).Settings.model_fields
    tiny = {k: v for k, v in {**TINY, **kind.settings}.items() if k in fields}
    settings = [f"algo.{k}={json.dumps(v)}" for k, v in {**tiny, **kind.asks}.items()]
    test = f"train.test_frequency={REPORT * (kind.steps // REPORT)}"
    return [*kind.overrides, *RUN, test, f"algo.name={algo}", *settings]


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


REFUSED_CELLS = [(a, e) for a in ALGORITHMS for e in ENVS
                 if (need := missing(algorithm_class(a), e)) and refusal(need)]


@pytest.mark.parametrize(("algo", "env"), REFUSED_CELLS, ids=map(cell_id, REFUSED_CELLS))
def test_what_an_algorithm_cannot_train_is_refused_before_any_step(algo, env, tmp_path):
    need = missing(algorithm_class(algo), env)
    assert need is not None
    with pytest.raises(ConfigError, match=refusal(need)):
        train(tiny_cfg(*overrides(algo, env), f"train.steps={ENVS[env].steps}"), tmp_path / "run")
    assert not (tmp_path / "run" / "metrics.jsonl").exists(), "it stepped before refusing"


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
    assert result.env_steps == cell.steps
    rows = read_metrics(result.run_dir)
    assert {r["phase"] for r in rows} == {"train", "test"}
    for row in rows:
        bad = {k: v for k, v in row.items() if isinstance(v, float) and not math.isfinite(v)}
        assert not bad, f"non-finite metrics at {row['env_steps']} env steps: {bad}"
    if cell.learns:
        assert cell.learned(rows), f"{cell.algo} reported no update in {cell.steps} env steps"


def test_a_run_stopped_and_resumed_equals_a_straight_one(cell):
    straight, split = cell.straight.run_dir, cell.resumed.run_dir
    assert cell.resumed.env_steps == cell.steps
    assert untimed_metrics(split) == untimed_metrics(straight)
    if cell.learns:  # it learned after the resume, or the check proves little
        after = [r for r in read_metrics(split) if r["env_steps"] > cell.steps // 2]
        assert cell.learned(after)
    a, b = newest_state(straight), newest_state(split)
    for part in ("algo", "storage", "runner", "rng"):
        assert_same_state(a[part], b[part], part)


def test_eval_scores_the_trained_policies(cell):
    if not ENVS[cell.env].evaluated:
        pytest.skip(f"{cell.env}: evaluate's acting and loading are checked by the others")
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
                assert policy.action_space.contains(as_action(policy.action_space, a)), a
                if isinstance(o, dict) and "action_mask" in o:
                    assert legal(policy.spec.action_view, o["action_mask"], a), (
                        f"policy {pid!r} took an illegal action {a}")
                if cell.learns and not explore:  # greedy acting is a function of the observation
                    assert_alike(batched[i], a)


def as_action(space: spaces.Space, action: Any) -> Any:
    """``action`` as ``space.contains`` takes it: a Dict or Tuple one as it is, leaf by leaf."""
    return action if is_composite(space) else np.asarray(action, space.dtype)


def legal(view: ActionView, mask: Any, action: Any) -> bool:
    """Whether ``action`` (in the env's terms) is legal under the env's ``mask``."""
    flags = view.legal(mask)
    if view.kind == "composite":
        return legal_in_row(view.leaves, from_env(view.leaves, action), flags)
    return bool(flags[int(action) - view.start])


def assert_alike(batched: Any, one: Any, where: str = "action") -> None:
    """The same action, leaf by leaf for a Dict or Tuple one, to float rounding: a batch may
    sum in another order than one row."""
    if isinstance(one, dict):
        assert isinstance(batched, dict) and batched.keys() == one.keys(), where
        for key in one:
            assert_alike(batched[key], one[key], f"{where}.{key}")
    elif isinstance(one, tuple):
        assert isinstance(batched, tuple) and len(batched) == len(one), where
        for i, (b, o) in enumerate(zip(batched, one, strict=True)):
            assert_alike(b, o, f"{where}.{i}")
    else:
        np.testing.assert_allclose(batched, one, rtol=1e-5, atol=1e-6, err_msg=where)


def observation(space: spaces.Space, seed: int) -> Any:
    """An observation of ``space``, drawn; a Dict one with an ``action_mask`` gets a mask with
    one illegal action (per leaf, for a mask keyed like a Dict or Tuple action space), so that
    acting legally means something."""
    space.seed(seed)
    obs = space.sample()
    if isinstance(obs, dict) and "action_mask" in obs:
        obs["action_mask"] = one_illegal(obs["action_mask"], seed)
    return obs


def one_illegal(mask: Any, seed: int) -> Any:
    """``mask`` with every action legal but one in each of its flag vectors."""
    if isinstance(mask, dict):
        return {key: one_illegal(part, seed) for key, part in mask.items()}
    if isinstance(mask, tuple):
        return tuple(one_illegal(part, seed) for part in mask)
    flags = np.ones_like(mask)
    flags[seed % len(flags)] = 0
    return flags


def test_a_learner_of_joint_rows_refuses_agents_that_come_and_go_naming_what_can(tmp_path):
    cfg = tiny_cfg(*ENVS["agents_come_and_go"].overrides, "algo.name=maddpg", "train.steps=60")
    with pytest.raises(ConfigError, match="use ippo or mappo"):
        train(cfg, tmp_path)

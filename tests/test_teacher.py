"""``algo.teacher``: the on-policy learners also learn to make a scripted player's moves."""

from __future__ import annotations

import json

import numpy as np
import pytest
import teachers
import torch
from gymnasium import spaces
from helpers import newest_state, straight_and_resumed
from pettingzoo.classic import tictactoe_v3

from interplay import load_policy
from interplay.algos.onpolicy.samples import PolicySamples
from interplay.algos.onpolicy.teacher import TeacherReplay
from interplay.config.loading import load, read
from interplay.config.validation import validate
from interplay.envs.spaces import action_view
from interplay.errors import ConfigError, ScriptedPolicyError, UserError
from interplay.experiment.loop import train
from interplay.experiment.run_store.statecodec import decode
from interplay.nets.distributions import ActionDist
from interplay.population.league.best_response import br_config

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
TTT = ["algo.name=ippo", "env.id=pettingzoo.classic.tictactoe_v3", "train.self_play=true",
       "env.num_envs=4", "algo.rollout=32", "algo.epochs=4", "algo.minibatches=2",
       "algo.lr=3e-3", "train.steps=4096", "log.every=1024", *QUIET]
TAUGHT = [*TTT, "algo.teacher=teachers:first_legal", "algo.teacher_coef=2.0"]


def positions(n: int, seed: int) -> list[dict]:
    """Observations from random tic-tac-toe games, with the mover's legal squares."""
    env = tictactoe_v3.env()
    rng = np.random.default_rng(seed)
    out: list[dict] = []
    while len(out) < n:
        env.reset(seed=int(rng.integers(1 << 30)))
        for _ in env.agent_iter():
            obs, _, term, trunc, _ = env.last()
            if term or trunc:
                break
            out.append(obs)
            env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    return out[:n]


def agreement(run_dir) -> float:
    """How often the trained policy, greedy, makes the teacher's move."""
    policy = load_policy(run_dir)
    held_out = positions(200, seed=7)
    same = [policy.act(o) == np.flatnonzero(o["action_mask"])[0]
            for o in held_out]
    return float(np.mean(same))


def test_the_policy_learns_the_teachers_moves(tmp_path):
    train(load([], TAUGHT), tmp_path / "taught")
    train(load([], TTT), tmp_path / "untaught")
    taught, untaught = agreement(tmp_path / "taught"), agreement(tmp_path / "untaught")
    assert taught >= 0.8 and taught > untaught + 0.4, (taught, untaught)
    rows = [json.loads(x) for x in (tmp_path / "taught" / "metrics.jsonl").read_text().splitlines()]
    ce = [r["teacher_ce/shared"] for r in rows if "teacher_ce/shared" in r]
    assert ce[-1] < 0.5 * ce[0] and rows[-1]["teacher_coef"] == 2.0


def test_the_teachers_weight_falls_to_zero_over_its_decay_steps(tmp_path):
    train(load([], [*TAUGHT, "algo.teacher_decay_steps=4096"]), tmp_path / "run")
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    coefs = [r["teacher_coef"] for r in rows if "teacher_coef" in r]
    assert coefs[0] > coefs[-1] >= 0 and coefs[-1] < 1.0


@pytest.mark.parametrize("setting, named", [
    ("algo.teacher=first_legal", "module:function"),
    ("algo.teacher=teachers:nobody", "nobody"),
    ("algo.teacher=no_such_module:first_legal", "no_such_module"),
])
def test_a_teacher_that_cannot_be_found_is_named(tmp_path, setting, named):
    with pytest.raises(ConfigError, match=named) as err:
        train(load([], [*TTT, setting]), tmp_path / "run")
    assert "algo.teacher" in str(err.value)


@pytest.mark.parametrize("overrides, named", [
    (["env.id=mpe2.simple_spread_v3", "env.kwargs.continuous_actions=true",
      "train.self_play=false"], "Discrete"),
    (["algo.model.recurrent=gru"], "recurrent"),
])
def test_what_a_teacher_cannot_teach_is_refused(tmp_path, overrides, named):
    with pytest.raises(ConfigError, match=named) as err:
        train(load([], [*TAUGHT, *overrides]), tmp_path / "run")
    assert "algo.teacher" in str(err.value)


@pytest.mark.parametrize("teacher, named", [("teachers:broken", "KeyError"),
                                            ("teachers:off_the_board", "99"),
                                            ("teachers:a_taken_square", "illegal")])
def test_a_teacher_that_fails_is_named(tmp_path, teacher, named):
    with pytest.raises(ScriptedPolicyError, match=named) as err:
        train(load([], [*TTT, f"algo.teacher={teacher}"]), tmp_path / "run")
    assert teacher in str(err.value)
    assert isinstance(err.value, UserError)


def test_snapshots_and_best_responses_learn_without_the_teacher(tmp_path):
    # The league's snapshots play half the moves; only the learner's are shown to the teacher.
    cfg = load([], [*TAUGHT, "league.snapshot_every=256", "train.steps=2048"])
    teachers.CALLS[0] = 0
    train(cfg, tmp_path / "run")
    rows = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    moves = json.loads(rows[-1])["agent_steps"]
    assert 0.35 * moves < teachers.CALLS[0] < 0.65 * moves, (teachers.CALLS[0], moves)
    assert br_config(cfg, "shared", "x", 100, 0)["algo"].get("teacher") is None


def test_exploiters_of_a_taught_learner_learn_on_their_own(tmp_path):
    # A main exploiter plays the learner, which shows the teacher only its own training moves.
    exploiters = ("league.exploiters=[{kind: main, num_envs: 2, min_games: 4, threshold: 0.5, "
                  "max_steps: 300}, {kind: league, num_envs: 2, min_games: 4, threshold: 0.5, "
                  "algo: {teacher: 'teachers:first_legal'}}]")
    cfg = load([], [*TAUGHT, "league.snapshot_every=512", "train.steps=1024", exploiters])
    teachers.CALLS[0] = 0
    train(cfg, tmp_path / "run")
    last = json.loads((tmp_path / "run" / "league.jsonl").read_text().splitlines()[-1])
    steps = {x["name"]: x["env_steps"] for x in last["exploiters"]}
    assert steps["main_exploiter_0"] > 0 and steps["league_exploiter_1"] > 0
    # The learner's moves (about half of its 1,024 env steps) and the league exploiter's
    # (about half of its 512); none of the main exploiter's or its opponent's.
    assert 0.35 * 1536 < teachers.CALLS[0] < 0.65 * 1536, teachers.CALLS[0]


def test_a_teacher_advises_only_where_it_has_a_move(tmp_path):
    train(load([], [*TTT, "algo.teacher=teachers:corner_when_open", "algo.teacher_coef=2.0"]),
          tmp_path / "run")
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(0 < r["teacher_share/shared"] < 1 for r in rows if "teacher_share/shared" in r)
    policy = load_policy(tmp_path / "run")
    open_corner = [o for o in positions(200, seed=3) if o["action_mask"][0]]
    assert np.mean([policy.act(o) == 0 for o in open_corner]) >= 0.9


def test_a_teacher_may_advise_several_moves_alike(tmp_path):
    train(load([], [*TTT, "algo.teacher=teachers:corners", "algo.teacher_coef=2.0"]),
          tmp_path / "run")
    policy = load_policy(tmp_path / "run")
    # Positions the policy meets playing itself, sampling its moves as in training.
    env, rng, seen = tictactoe_v3.env(), np.random.default_rng(5), []
    while len(seen) < 200:
        env.reset(seed=int(rng.integers(1 << 30)))
        for _ in env.agent_iter():
            obs, _, term, trunc, _ = env.last()
            if term or trunc:
                break
            if obs["action_mask"][[0, 2, 6, 8]].any():
                seen.append(obs)
            env.step(int(policy.act(obs, explore=True)))
    picks = [policy.act(o) for o in seen]
    by_chance = np.mean([o["action_mask"][[0, 2, 6, 8]].sum() / o["action_mask"].sum()
                         for o in seen])
    assert np.mean(np.isin(picks, [0, 2, 6, 8])) >= max(0.9, by_chance + 0.2), by_chance


def test_a_teacher_with_no_advice_teaches_nothing(tmp_path):
    train(load([], [*TTT, "algo.teacher=teachers:silent", "train.steps=256"]), tmp_path / "run")
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    taught = [r for r in rows if "teacher_ce/shared" in r]
    assert taught and all(r["teacher_ce/shared"] == 0 and r["teacher_share/shared"] == 0
                          for r in taught)


EARLY_TEACHER = [*TTT, "algo.teacher=teachers:first_legal_early", "algo.teacher_coef=2.0"]


def early_advice_run(run_dir, overrides: list[str]) -> dict[str, list]:
    """A run whose teacher speaks in the first rollout only (64 moves); per report, its
    ``teacher_ce`` and ``teacher_replay_ce`` (None where absent)."""
    teachers.EARLY[0] = 64
    train(load([], [*EARLY_TEACHER, *overrides]), run_dir)
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "teacher_ce/shared" in r]
    return {key: [r.get(f"{key}/shared") for r in rows]
            for key in ("teacher_ce", "teacher_replay_ce")}


def test_a_replayed_teacher_goes_on_teaching_what_it_advised_earlier(tmp_path):
    # Without a replay the later updates have nothing to learn from the teacher; with one
    # they draw its advice again.
    runs = {name: early_advice_run(tmp_path / name, [f"algo.teacher_replay={replay}"])
            ["teacher_ce"] for name, replay in (("replayed", 256), ("once", 0))}
    assert runs["once"][-1] == 0 and runs["replayed"][-1] > 0, runs
    assert runs["replayed"][-1] < 0.5 * runs["replayed"][0], runs
    replayed, once = agreement(tmp_path / "replayed"), agreement(tmp_path / "once")
    assert replayed > once + 0.2, (replayed, once)


def test_steps_on_the_replay_alone_teach_its_advice_further(tmp_path):
    # 8 more gradient steps per update on the replayed advice alone leave the policy closer
    # to it than the replay drawn into the update's own steps does.
    runs = {name: early_advice_run(tmp_path / name, ["algo.teacher_replay=256",
                                                     f"algo.teacher_steps={steps}"])
            for name, steps in (("distilled", 8), ("replayed", 0))}
    assert all(x is None for x in runs["replayed"]["teacher_replay_ce"]), runs
    distilled_ce = runs["distilled"]["teacher_replay_ce"]
    assert distilled_ce[-1] < distilled_ce[0], runs
    assert runs["distilled"]["teacher_ce"][-1] < 0.5 * runs["replayed"]["teacher_ce"][-1], runs
    distilled, replayed = agreement(tmp_path / "distilled"), agreement(tmp_path / "replayed")
    assert distilled >= replayed, (distilled, replayed)


def test_the_teachers_replay_keeps_its_newest_advised_rows():
    replay = TeacherReplay(5, np.random.default_rng(0))
    for start in (0, 4):  # 8 advised rows of 12 into room for 5
        advice = np.zeros((6, 3), bool)
        advice[:4, 1] = True
        replay.add(PolicySamples(
            rollout=None, at=(np.zeros(6, int),) * 2 + (np.arange(6),),
            raw_obs=np.arange(start, start + 6, dtype=np.float32)[:, None], obs=None,
            next_obs=None, action=None, logp=None, mask=None, terminated=None, teacher=advice))
    assert replay.count == 5
    assert sorted(replay.rows["obs"][:, 0].tolist()) == [3, 4, 5, 6, 7]
    saved = replay.state_dict()
    again = TeacherReplay(5, np.random.default_rng(1))
    again.load_state_dict(saved)
    assert again.head == replay.head and (again.rows["obs"] == replay.rows["obs"]).all()
    assert (again.rng.integers(0, 99, 4) == replay.rng.integers(0, 99, 4)).all()


def test_a_run_with_a_teachers_replay_resumes_exactly(tmp_path):
    straight, resumed = straight_and_resumed(
        [*TAUGHT, "algo.teacher_replay=100", "algo.teacher_steps=2", "league.snapshot_every=256"],
        1024, tmp_path)
    assert straight == resumed
    # the replay is the learner's own: checkpoints keep it, league snapshots do not
    assert newest_state(tmp_path / "straight")["algo"]["teacher_replay"]["shared"]["count"] > 0
    snaps = sorted((tmp_path / "straight" / "league").glob("snapshot_*.pt"))
    assert snaps and all("teacher_replay" not in decode(torch.load(f, weights_only=True))
                         for f in snaps)


def test_a_replay_larger_than_memory_is_refused_before_training(tmp_path):
    with pytest.raises(UserError, match="algo.teacher_replay") as err:
        train(load([], [*TAUGHT, "algo.teacher_replay=2000000000"]), tmp_path / "run")
    assert "advised moves" in str(err.value)


def test_a_replay_without_a_teacher_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="algo.teacher_replay"):
        train(load([], [*TTT, "algo.teacher_replay=100"]), tmp_path / "run")
    with pytest.raises(ConfigError, match="algo.teacher_steps"):
        train(load([], [*TAUGHT, "algo.teacher_steps=4"]), tmp_path / "run")
    assert br_config(load([], [*TAUGHT, "algo.teacher_replay=100"]), "shared", "x", 100,
                     0)["algo"].get("teacher_replay") is None
    # a best response learns on its own: none of the teacher's settings stay to be refused
    alone = br_config(load([], [*TAUGHT, "algo.teacher_replay=100", "algo.teacher_steps=4"]),
                      "shared", "x", 100, 0)
    assert not [k for k in alone["algo"] if k.startswith("teacher")], alone["algo"]
    assert validate(read([], [], base=alone)).algo.teacher_steps == 0


@pytest.mark.parametrize("space", [spaces.Discrete(5), spaces.MultiDiscrete([3, 4])])
def test_the_advised_moves_probability_is_the_sum_of_theirs(space):
    dist = ActionDist(action_view(space, "a"))
    rng = np.random.default_rng(0)
    logits = torch.randn(64, dist.net_out)
    legal = torch.ones(64, dist.net_out, dtype=torch.bool)
    legal[:, 0] = False  # the first choice of the first dimension is never legal
    allowed = torch.from_numpy(rng.random((64, dist.net_out)) < 0.4)
    allowed &= legal  # a teacher advises legal moves only
    allowed[:8] = False  # rows with no advice
    logp, advised = dist.log_prob_any(logits, legal, allowed)
    assert advised.tolist() == allowed.any(dim=1).tolist()
    want = torch.zeros(64)
    for block, ok, free in zip(logits.split(dist.sizes, 1), allowed.split(dist.sizes, 1),
                               legal.split(dist.sizes, 1), strict=True):
        p = torch.softmax(block.masked_fill(~free, -1e9), dim=1)
        has = ok.any(dim=1)
        want += torch.where(has, torch.log((p * ok).sum(dim=1).clamp_min(1e-30)), 0.0)
    assert torch.allclose(logp[advised], want[advised], atol=1e-4)

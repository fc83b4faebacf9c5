"""Each policy its own learner: per-policy algorithm settings, and which policies train."""

from __future__ import annotations

import pytest
import torch
import yaml
from helpers import read_metrics

from interplay.config.loading import load
from interplay.errors import ConfigError
from interplay.experiment.loop import Experiment, resume, train
from interplay.experiment.run_store.checkpoint import latest_valid, load_checkpoint
from interplay.run.callbacks import Callbacks

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
TAG = ["env.id=mpe2.simple_tag_v3", "env.num_envs=2",
       "env.kwargs={num_good: 1, num_adversaries: 2, num_obstacles: 1, max_cycles: 25}",
       "algo.name=ippo", "algo.rollout=50", "policies.adversary={}",
       "policies.agent.algo={name: dqn, learning_starts: 200, batch_size: 32}"]
SPREAD = ["env.id=spread", "env.num_envs=4", "algo.name=ippo", "algo.rollout=25",
          "policies.a.agents=[agent_0]", "policies.b.agents=[agent_1, agent_2]",
          "policies.b.algo.lr=0.007"]


def _numbers(rows):
    skip = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}
    return [{k: v for k, v in r.items() if k not in skip} for r in rows]


def test_two_algorithms_in_one_env_learn_side_by_side_and_resume_exactly(tmp_path):
    common = [*TAG, *QUIET, "log.every=300", "train.test_frequency=450", "train.test_episodes=2"]
    train(load([], [*common, "train.steps=900"]), tmp_path / "straight")
    train(load([], [*common, "train.steps=450"]), tmp_path / "split")
    resume(tmp_path / "split", ["train.steps=900"])
    a, b = read_metrics(tmp_path / "straight"), read_metrics(tmp_path / "split")
    assert _numbers(a) == _numbers(b)
    last = [r for r in a if r["phase"] == "train"][-1]
    assert "lr/adversary" in last and "policy_loss/adversary" in last  # ippo's, per policy
    assert "epsilon/agent" in last and "loss/agent" in last  # dqn's
    assert "lr" not in last and "epsilon" not in last


def test_a_policy_with_ten_times_the_learning_rate_shows_both_rates(tmp_path):
    train(load([], [*SPREAD, *QUIET, "train.steps=300", "log.every=100"]), tmp_path / "run")
    last = [r for r in read_metrics(tmp_path / "run") if r["phase"] == "train"][-1]
    assert last["lr/a"] == pytest.approx(7e-4) and last["lr/b"] == pytest.approx(7e-3)
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["policies"]["b"]["algo"]["lr"] == pytest.approx(0.007)
    assert saved["algo"]["lr"] == pytest.approx(7e-4)


def _weights(exp, pid):
    return {k: v.clone() for k, v in exp.algo.parts[exp.algo.owner[pid]][0]
            .policies[pid].actor.state_dict().items()}


def test_policies_left_out_of_training_keep_their_weights_bit_for_bit(tmp_path):
    cfg = load([], [*SPREAD, *QUIET, "train.steps=200", "train.policies_to_train=[b]"])
    exp = Experiment(cfg, tmp_path / "run")
    before_a, before_b = _weights(exp, "a"), _weights(exp, "b")
    exp.run()
    after_a, after_b = _weights(exp, "a"), _weights(exp, "b")
    assert all(torch.equal(before_a[k], after_a[k]) for k in before_a)
    assert any(not torch.equal(before_b[k], after_b[k]) for k in before_b)
    # On resume the other side trains, and the one trained before stays as it was.
    resume(tmp_path / "run", ["train.steps=400", "train.policies_to_train=[a]"])
    state, _ = load_checkpoint(latest_valid(tmp_path / "run"))
    actors = {pid: s["actor"] for pid, s in state["algo"]["learners"][0]["policies"].items()}
    actors.update({pid: s["actor"] for pid, s in state["algo"]["learners"][1]["policies"].items()})
    now_a, now_b = actors["a"], actors["b"]
    assert any(not torch.equal(after_a[k], now_a[k]) for k in after_a)
    assert all(torch.equal(after_b[k], now_b[k]) for k in after_b)


class Alternate(Callbacks):
    """Trains one side at a time, switching every 100 env steps."""

    def on_sample_end(self, *, runner, env_steps):
        side = ["a"] if (env_steps // 100) % 2 == 0 else ["b"]
        runner.experiment.set_policies_to_train(side)


def test_a_callback_alternates_which_policy_trains(tmp_path):
    cfg = load([], [*SPREAD, *QUIET, "train.steps=400"])
    exp = Experiment(cfg, tmp_path / "run", callbacks=[Alternate()])
    seen = []
    update = exp.algo.update

    def record(storage):
        seen.append(sorted(exp.algo.training))
        return update(storage)

    exp.algo.update = record
    exp.run()
    assert ["a"] in seen and ["b"] in seen


@pytest.mark.parametrize(("extra", "message"), [
    (["policies.b.algo.lrr=0.1"], r"policies\.b\.algo\.lrr: unknown key; did you mean"),
    (["policies.b.algo.name=dqnn"], r"policies\.b\.algo\.name: unknown algorithm 'dqnn'"),
    (["policies.b.algo.lr=-1"], r"policies\.b\.algo\.lr"),
    (["train.policies_to_train=[c]"], r"train\.policies_to_train: 'c' names no trained policy"),
    (["policies.b.type=random"], r"policies\.b\.algo: policy 'b' is random"),
    (["algo.name=maddpg", "algo.batch_size=8", "policies.b.algo={lr_actor: 0.01}"],
     r"policies 'a' \(maddpg\) and 'b' \(maddpg\)"),
])
def test_what_cannot_work_is_refused_before_any_work(tmp_path, extra, message):
    maddpg = "algo.name=maddpg" in extra  # PPO's settings are not MADDPG's
    base = [o for o in SPREAD if not (maddpg and o.startswith(("algo.rollout", "policies.b.algo")))]
    with pytest.raises(ConfigError, match=message):
        cfg = load([], [*base, *QUIET, "train.steps=50", *extra])
        Experiment(cfg, tmp_path / "run")


def test_a_turn_based_game_refuses_maddpg_for_one_side_naming_it(tmp_path):
    with pytest.raises(ConfigError, match=r"policies\.b\.algo\.name: policies \['b'\]"):
        Experiment(load([], ["env.id=pettingzoo.classic.tictactoe_v3", "algo.name=dqn",
                             "policies.a.agents=[player_1]", "policies.b.agents=[player_2]",
                             "policies.b.algo={name: maddpg}", *QUIET]), tmp_path / "run")


@pytest.mark.slow
@pytest.mark.learning
def test_ppo_chasers_and_a_dqn_runner_each_beat_a_random_version_of_themselves(
        tmp_path, learning_result):
    """simple_tag with IPPO for the two adversaries and DQN for the prey: each trained side,
    against the other trained side, does better than a random policy in its place."""
    import numpy as np

    from interplay.experiment.build import make_vec_env
    from interplay.run.actors import RandomActor
    from interplay.run.runner import Runner
    from interplay.seeding import rng_for

    cfg = load([], ["env.id=mpe2.simple_tag_v3", "env.num_envs=8",
                    "env.kwargs={num_good: 1, num_adversaries: 2, num_obstacles: 1, "
                    "max_cycles: 25}", "algo.name=ippo", "algo.rollout=50", "algo.lr=0.001",
                    "policies.adversary={}", "policies.agent.algo={name: dqn, "
                    "learning_starts: 1000, batch_size: 64, exploration_steps: 20000}",
                    "train.steps=60000", *QUIET])
    exp = Experiment(cfg, tmp_path / "run")
    exp.run()

    def score(random_side: str | None) -> dict[str, float]:
        env, copies = make_vec_env(cfg, num_envs=8)
        actors = dict(exp.actors)
        if random_side:
            actors[random_side] = RandomActor(exp.specs[random_side], rng_for(5, random_side))
        runner = Runner(env, exp.specs, actors, set(), None, copies)
        runner.reset(123)
        while runner.episodes < 200:
            runner.step(explore=False)
        env.close()
        return {p: float(np.mean(v)) for p, v in runner.window.by_policy.items()}

    both, random_chasers, random_prey = score(None), score("adversary"), score("agent")
    learning_result(env="simple_tag_v3", algo="ippo (chasers) + dqn (prey)", steps=60_000,
                    score=both, random={"adversary": random_chasers["adversary"],
                                        "agent": random_prey["agent"]})
    assert both["adversary"] > random_chasers["adversary"] + 1.0  # measured 4.35 vs 1.8
    assert both["agent"] > random_prey["agent"] + 5.0  # measured -4.9 vs -18.2

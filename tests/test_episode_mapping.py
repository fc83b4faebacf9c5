"""train.policy_mapping_fn with RLlib's signature is called at the start of every episode in
every copy; each policy acts, learns and is scored only where it was put."""

from __future__ import annotations

import episode_mapping_fns as fns
import numpy as np
import pytest
from gymnasium import spaces
from helpers import read_metrics

from interplay.cli import main
from interplay.config.loading import load
from interplay.envs.registry import register_env
from interplay.envs.toy import SharedSpaces
from interplay.errors import ConfigError
from interplay.experiment.build import make_specs, make_vec_env
from interplay.experiment.loop import resume, train
from interplay.run.actors import RandomActor
from interplay.run.runner import Runner
from interplay.seeding import rng_for

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
SELF_PLAY = ["train.policy_mapping_fn=episode_mapping_fns:learner_on_a_random_seat",
             "policies.main.type=trainable", "policies.rand.type=random"]


class Seats(SharedSpaces):
    """Two agents, each observing its own seat number and its copy's episode number; episodes
    last three steps."""

    metadata = {"name": "seats", "render_modes": []}

    def __init__(self):
        super().__init__(["player_1", "player_2"], spaces.Box(0, 1e6, (2,), np.float32),
                         spaces.Discrete(2))
        self.episode = 0

    def _obs(self):
        return {a: np.array([i, self.episode], np.float32) for i, a in enumerate(self.agents)}

    def reset(self, seed=None, options=None):
        self.episode += 1
        self.t = 0
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        obs, agents = self._obs(), self.agents
        if self.t >= 3:
            self.agents = []
        return (obs, {a: float(actions[a]) for a in agents}, dict.fromkeys(agents, False),
                dict.fromkeys(agents, self.t >= 3), {a: {} for a in agents})


class TwoKinds(SharedSpaces):
    """Agents ``a_0`` and ``b_0`` with observations of different sizes."""

    metadata = {"name": "two_kinds", "render_modes": []}

    def __init__(self):
        super().__init__(["a_0", "b_0"], spaces.Box(0, 1, (2,), np.float32), spaces.Discrete(2))
        self._b = spaces.Box(0, 1, (3,), np.float32)

    def observation_space(self, agent):
        return self._b if agent == "b_0" else self._obs_space

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return {a: self.observation_space(a).low for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        agents, self.agents = self.agents, []
        return ({a: self.observation_space(a).low for a in agents}, dict.fromkeys(agents, 0.0),
                dict.fromkeys(agents, True), dict.fromkeys(agents, False), {a: {} for a in agents})


@pytest.fixture(autouse=True)
def _fresh():
    register_env("seats", Seats)
    register_env("two_kinds", TwoKinds)
    fns.reset()


def seats_runner(num_envs: int = 3):
    cfg = load([], ["env.id=seats", f"env.num_envs={num_envs}", *SELF_PLAY])
    env, copies = make_vec_env(cfg)
    specs = make_specs(cfg, env)
    fns.reset()  # from here on, the calls made for real episodes
    actors = {pid: RandomActor(s, rng_for(0, pid)) for pid, s in specs.items()}
    return Runner(env, specs, actors, set(specs), copies=copies), specs


def test_each_policy_gets_only_the_transitions_of_the_seats_it_was_given():
    runner, specs = seats_runner()
    assert specs["main"].agents == specs["rand"].agents == ("player_1", "player_2")
    runner.reset(0)
    rows = {"main": 0, "rand": 0}
    seats: dict[str, set] = {"main": set(), "rand": set()}
    first: dict[int, int] = {}  # copy -> the env's count of its first episode here
    for _ in range(60):
        for pid, t in runner.step().items():
            for e, (seat, episode) in zip(t.env.tolist(), t.obs.astype(int).tolist(), strict=True):
                agent = ("player_1", "player_2")[seat]
                number = episode - first.setdefault(e, episode) + 1  # the copy's 1st, 2nd...
                assert fns.GIVEN[(e, number)][agent] == pid
                seats[pid].add(agent)
            rows[pid] += len(t.env)
    # 20 episodes in each of 3 copies, one seat each, 3 steps: 180 transitions per policy
    assert rows["main"] == rows["rand"] == 180
    assert seats["main"] == seats["rand"] == {"player_1", "player_2"}
    # asked per agent at the start of every episode: 3 copies' first ones and 20 more each
    assert len(fns.CALLS) == 2 * 3 * 21
    assert len({(ep, e) for _, ep, e in fns.CALLS}) == 63


def test_episodes_are_scored_by_the_policy_that_played_them(tmp_path):
    train(load([], ["env.id=pettingzoo.classic.tictactoe_v3", "algo.name=dqn", "env.num_envs=2",
                    "train.steps=600", "log.every=600", *SELF_PLAY, *QUIET]), tmp_path / "r")
    row = read_metrics(tmp_path / "r")[-1]
    # one seat each per game, in a zero-sum game: the two policies' returns cancel out
    assert row["policy_return_mean/main"] == pytest.approx(-row["policy_return_mean/rand"])
    learner_seats = {seats["player_1"] for seats in fns.GIVEN.values()}
    assert learner_seats == {"main", "rand"}


def test_a_per_episode_mapping_resumes_exactly(tmp_path):
    common = ["env.id=pettingzoo.classic.tictactoe_v3", "algo.name=dqn", "env.num_envs=2",
              "log.every=100", "algo.learning_starts=50", *SELF_PLAY, *QUIET]
    train(load([], [*common, "train.steps=400"]), tmp_path / "straight")
    train(load([], [*common, "train.steps=200"]), tmp_path / "split")
    resume(tmp_path / "split", ["train.steps=400"])

    def numbers(name):
        return [{k: v for k, v in r.items() if "per_s" not in k and k not in ("wall_s", "time")}
                for r in read_metrics(tmp_path / name)]

    assert numbers("straight") == numbers("split")


def test_a_policy_the_run_has_not_is_named_when_the_function_returns_it(tmp_path, capsys):
    code = main(["train", "-s", "env.id=spread", "-s", "env.num_envs=2", "-s", "train.steps=400",
                 "-s", "train.policy_mapping_fn=episode_mapping_fns:late_ghost",
                 "--run-dir", str(tmp_path / "r"), *[x for q in QUIET for x in ("-s", q)]])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "returned policy 'ghost'" in err and "episode 12" in err and "['shared']" in err


def test_an_agent_put_on_a_policy_of_other_spaces_is_named():
    cfg = load([], ["env.id=two_kinds", "env.num_envs=2",
                    "train.policy_mapping_fn=episode_mapping_fns:swaps_spaces"])
    env, copies = make_vec_env(cfg)
    specs = make_specs(cfg, env)
    assert specs["pa"].agents == ("a_0",) and specs["pb"].agents == ("b_0",)
    actors = {pid: RandomActor(s, rng_for(0, pid)) for pid, s in specs.items()}
    runner = Runner(env, specs, actors, set(), copies=copies)
    runner.reset(0)
    with pytest.raises(ConfigError, match=r"mapped agent 'b_0' to policy 'pa' \(episode 12"):
        for _ in range(20):
            runner.step()


def test_a_league_refuses_a_per_episode_mapping(tmp_path):
    with pytest.raises(ConfigError, match="policy_mapping_fn"):
        train(load([], ["env.id=pettingzoo.classic.tictactoe_v3", "algo.name=dqn",
                        "train.steps=100", "league.snapshot_every=50", *SELF_PLAY, *QUIET]),
              tmp_path / "r")


def test_over_a_thousand_episodes_each_seat_gets_the_learner_about_half_the_time():
    runner, _ = seats_runner(num_envs=8)
    runner.reset(0)
    while runner.episodes < 1000:
        runner.step()
    learner_on = [seats["player_1"] == "main" for seats in fns.GIVEN.values()]
    assert len(learner_on) >= 1000
    assert 0.45 < sum(learner_on) / len(learner_on) < 0.55
    assert all(set(seats.values()) == {"main", "rand"} for seats in fns.GIVEN.values())

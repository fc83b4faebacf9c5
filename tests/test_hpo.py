"""Evolutionary search: generations, selection with elitism, mutations, rating fitness, resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers import StopAfter

from interplay.config.loading import load
from interplay.errors import ConfigError
from interplay.experiment.run_store.interrupt import Interrupted
from interplay.population.hpo import Search, _fit, mutate_arch, mutate_hp, search

SPREAD = ["algo.name=ippo", "env.id=spread", "env.num_envs=8", "algo.rollout=25",
          "hpo.population=3", "hpo.generations=3", "hpo.evo_steps=1000", "train.test_episodes=8",
          "hpo.init={lr: [1.0e-5, 1.0e-2]}", "log.console=false"]


def rows(run_dir):
    return [json.loads(line) for line in (run_dir / "hpo.jsonl").read_text().splitlines()]


def test_a_search_writes_a_row_per_member_per_generation_and_keeps_the_elite(tmp_path):
    best = search(load([], SPREAD), tmp_path / "s")
    got = rows(tmp_path / "s")
    assert [r["generation"] for r in got] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    for g in (0, 1):
        this = [r for r in got if r["generation"] == g]
        nxt = [r for r in got if r["generation"] == g + 1]
        fittest = max(this, key=lambda r: r["fitness"])
        assert nxt[0]["parent"] == fittest["member"] and nxt[0]["mutation"] == "none (elite)"
        assert {r["parent"] for r in nxt} <= {r["member"] for r in this}
        assert all(r["env_steps"] == 1000 * (g + 2) for r in nxt)
    assert len({r["hyperparameters"]["lr"] for r in got if r["generation"] == 0}) == 3
    assert (best / "checkpoints").is_dir() and json.loads((best / "member.json").read_text())
    assert (tmp_path / "s" / "lineage.png").stat().st_size > 1000


def test_the_command_shows_a_leaderboard_per_generation(tmp_path, capsys):
    from interplay.cli import main

    code = main(["hpo", "--run-dir", str(tmp_path / "s"), *[a for o in SPREAD for a in ("-s", o)],
                 "-s", "hpo.generations=2"])
    assert code == 0
    shown = capsys.readouterr()
    assert "generation 1" in shown.err and "fitness" in shown.err and "none (elite)" in shown.err
    assert (tmp_path / "s" / "lineage.png").is_file() and (tmp_path / "s" / "best").is_dir()


def test_a_search_stopped_mid_generation_resumes_to_the_same_rows(tmp_path):
    short = [*SPREAD, "hpo.evo_steps=400"]  # 50 steps of the 8 copies a member and generation
    search(load([], short), tmp_path / "straight")
    cfg = load([], short)
    with pytest.raises(Interrupted):
        search(cfg, tmp_path / "split", stop=StopAfter(3 * 50 + 25))  # inside generation 1
    assert 0 < len(rows(tmp_path / "split")) < 9
    search(load([tmp_path / "split" / "config.yaml"], []), tmp_path / "split", resume=True)
    a, b = rows(tmp_path / "straight"), rows(tmp_path / "split")
    assert a == b


def test_hyper_parameter_mutations_stay_in_their_ranges():
    cfg = load([], [*SPREAD, "hpo.ranges={ent_coef: [0.0, 0.02], lr: [1.0e-4, 2.0e-4]}"])
    rng = np.random.default_rng(0)
    for _ in range(60):
        cfg, what = mutate_hp(cfg, cfg.hpo, rng)
        assert 1e-4 <= cfg.algo.lr <= 2e-4 or "lr" not in what
        assert 0.0 <= cfg.algo.ent_coef <= 0.02 or "ent_coef" not in what
        assert 1 <= cfg.algo.epochs <= 20 and 1 <= cfg.algo.minibatches <= 32


def test_architecture_mutations_keep_the_weights_that_still_fit():
    cfg = load([], SPREAD)
    rng = np.random.default_rng(3)
    seen = set()
    for _ in range(20):
        child, what = mutate_arch(cfg, rng)
        seen.add(what.split(":")[0])
        assert child.algo.model.hidden != cfg.algo.model.hidden
    assert {"add_layer", "remove_layer", "add_units", "remove_units"} <= seen
    old, new = torch.randn(64, 18), torch.zeros(80, 18)
    fitted = _fit({"w": old}, {"w": new}, True)["w"]
    assert fitted.shape == (80, 18) and torch.equal(fitted[:64], old)


def test_a_mutated_learning_rate_reaches_the_optimiser_and_moments_are_kept(tmp_path):
    cfg = load([], ["algo.name=dqn", "env.id=spread", "env.num_envs=2", "hpo.population=2",
                    "hpo.generations=2", "hpo.evo_steps=300", "algo.learning_starts=100",
                    "algo.batch_size=16", "train.test_episodes=2", "log.console=false",
                    "hpo.mutation={none: 0, hp: 1, arch: 0, noise: 0, activation: 0}",
                    "hpo.ranges={lr: [1.0e-4, 1.0e-2]}"])
    s = Search(cfg, tmp_path / "s")
    (tmp_path / "s").mkdir()
    s.populate()
    from interplay.population.hpo import train_members
    train_members(s.members, 300)
    parent = s.members[0]
    for _ in range(10):  # until the mutation hits lr
        child = s._offspring(parent, "hp")
        if child.cfg.algo.lr != parent.cfg.algo.lr:
            break
    p_opt = parent.exp.algo.policies["agent"].optimizer
    c_opt = child.exp.algo.policies["agent"].optimizer
    assert c_opt.param_groups[0]["lr"] == pytest.approx(child.cfg.algo.lr)
    assert c_opt.param_groups[0]["lr"] != pytest.approx(p_opt.param_groups[0]["lr"])
    p_state, c_state = p_opt.state_dict()["state"], c_opt.state_dict()["state"]
    assert torch.equal(p_state[0]["exp_avg"], c_state[0]["exp_avg"])


def test_rating_fitness_plays_every_member_the_same_number_of_games(tmp_path, monkeypatch):
    import interplay.experiment.versus as versus

    played: dict[int, int] = {}
    real = versus.play_pair

    def counting(a, b, games, seed):
        out = real(a, b, games, seed)
        for x in (a, b):
            played[id(x)] = played.get(id(x), 0) + len(out)
        return out

    monkeypatch.setattr(versus, "play_pair", counting)
    cfg = load([], ["algo.name=dqn", "env.id=pettingzoo.classic.tictactoe_v3", "env.num_envs=2",
                    "train.self_play=true", "hpo.population=3", "hpo.generations=1",
                    "hpo.evo_steps=200", "hpo.fitness=rating", "hpo.games=4",
                    "hpo.opponents=[random]", "algo.learning_starts=50", "log.console=false"])
    search(cfg, tmp_path / "s")
    got = rows(tmp_path / "s")
    assert len(got) == 3 and len({r["fitness"] for r in got}) > 1
    members = [n for k, n in played.items()]
    assert sorted(members)[-3:] == [12, 12, 12]  # 2 members + random, 4 games each


def test_a_shared_buffer_is_one_buffer(tmp_path):
    cfg = load([], ["algo.name=dqn", "env.id=spread", "env.num_envs=2", "hpo.population=2",
                    "hpo.generations=2", "hpo.evo_steps=200", "hpo.shared_buffer=true",
                    "algo.learning_starts=100", "train.test_episodes=2", "log.console=false"])
    s = Search(cfg, tmp_path / "s")
    (tmp_path / "s").mkdir()
    s.populate()
    assert s.members[0].exp.storage is s.members[1].exp.storage


@pytest.mark.parametrize(("extra", "message"), [
    (["hpo.ranges={lr: [-1.0, 0.1]}"], r"hpo\.ranges\.lr: -1\.0 is not a valid lr"),
    (["hpo.population=2", "hpo.tournament_size=3"], r"tournament_size 3 is larger"),
    (["hpo.mutation={hp: 1, shuffle: 2}"], r"hpo\.mutation\.shuffle: unknown key"),
    (["hpo.init={lrr: [0.1, 0.2]}"], r"hpo\.init\.lrr: ippo has no setting 'lrr'"),
    (["hpo.opponents=[nobody]"], r"hpo\.opponents: 'nobody'"),
])
def test_bad_search_settings_are_named_before_any_work(tmp_path, extra, message):
    with pytest.raises(ConfigError, match=message):
        search(load([], [*SPREAD, *extra]), tmp_path / "s")
    assert not (tmp_path / "s" / "members").exists()


@pytest.mark.slow
@pytest.mark.learning
def test_a_small_search_on_spread_beats_random(tmp_path, learning_result):
    cfg = load([], ["algo.name=ippo", "env.id=spread", "env.num_envs=512", "algo.rollout=16",
                    "algo.epochs=2", "algo.minibatches=8", "algo.model.activation=relu",
                    "hpo.population=3", "hpo.generations=4", "hpo.evo_steps=250000",
                    "train.test_episodes=64", "hpo.init={lr: [3.0e-4, 3.0e-3]}",
                    "log.console=false"])
    search(cfg, tmp_path / "s")
    last = [r for r in rows(tmp_path / "s") if r["generation"] == 3]
    best = max(r["fitness"] for r in last)
    learning_result(env="spread", algo="ippo search (3 members, 4 generations)",
                    steps=3 * 4 * 250_000, score=best, random=-79.0)
    assert best > -65  # the sum over three agents; random policies score about -79


def test_cnn_channels_mutate_and_children_keep_fitting_weights(tmp_path):
    cfg = load([], ["algo.name=ippo", "env.id=interplay.envs.pixels", "env.num_envs=2",
                    "algo.rollout=20", "hpo.population=2", "hpo.generations=3",
                    "hpo.evo_steps=40", "train.test_episodes=2", "log.console=false",
                    "hpo.mutation={none: 0, hp: 0, arch: 1, noise: 0, activation: 0}"])
    search(cfg, tmp_path / "s")
    changes = [r["mutation"] for r in rows(tmp_path / "s") if r["generation"] > 0
               and r["mutation"] != "none (elite)"]
    assert changes and all(c.split(":")[0] in {"add_layer", "remove_layer", "add_units",
                                                "remove_units", "add_channels",
                                                "remove_channels"} for c in changes)
    assert any("channels" in c for c in changes)

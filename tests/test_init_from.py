"""Warm starts: ``policies.<pid>.init_from`` and ``hpo.init_from``."""

from __future__ import annotations

import json
import re

import pytest
import torch
from helpers import read_metrics

from interplay.cli import main
from interplay.config.loading import load
from interplay.errors import ConfigError
from interplay.experiment.loop import Experiment, train
from interplay.experiment.policies import PolicyLoadError
from interplay.experiment.run_store.checkpoint import latest_valid, load_checkpoint
from interplay.experiment.warm_start import requests, warm_start

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
SPREAD = ["env.id=spread", "env.num_envs=2", "train.steps=20", "algo.model.hidden=[16]", *QUIET]
ALGOS = {
    "ippo": ["algo.rollout=8"], "mappo": ["algo.rollout=8"],
    "dqn": ["algo.learning_starts=1000"], "vdn": ["algo.learning_starts=1000"],
    "qmix": ["algo.learning_starts=1000"], "isac": ["algo.learning_starts=1000"],
    "masac": ["algo.learning_starts=1000"], "maddpg": ["algo.learning_starts=1000"],
    "matd3": ["algo.learning_starts=1000"],
}


def _source(tmp_path, name, extra=()):
    run = tmp_path / f"src_{name}"
    train(load([], [*SPREAD, f"algo.name={name}", *ALGOS[name], *extra]), run)
    return run


def _tensors(module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _parts(exp, pid="agent"):
    return exp.algo.of(pid).warm_parts(pid)


def _experiment(tmp_path, overrides, name="dst"):
    return Experiment(load([], overrides), tmp_path / name)


@pytest.mark.parametrize("name", list(ALGOS))
def test_every_algorithm_starts_from_another_runs_actor_with_a_fresh_optimiser(tmp_path, name):
    source = _source(tmp_path, name)
    parent = _experiment(tmp_path, [*SPREAD, f"algo.name={name}", *ALGOS[name]], "parent")
    parent.load_state_dict(load_checkpoint(latest_valid(source))[0])
    child = _experiment(tmp_path, [*SPREAD, f"algo.name={name}", *ALGOS[name], "train.seed=7",
                                   f"policies.agent.init_from={source}"])
    theirs, before = _parts(parent), _parts(child)
    rest_before = {n: _tensors(m) for n, m in before.rest.items() if hasattr(m, "state_dict")}
    record = warm_start(child.algo, child.specs, requests(child.cfg, child.specs), child.run_dir)
    ours = _parts(child)
    for part, module in ours.actor.items():
        if hasattr(module, "parameters"):
            a, b = _tensors(theirs.actor[part]), _tensors(module)
            assert all(torch.equal(a[k], b[k]) for k in a), part
    for part, saved in rest_before.items():  # init_parts: actor leaves the critics as built
        assert all(torch.equal(saved[k], v) for k, v in _tensors(ours.rest[part]).items()), part
    assert record[0]["policy_id"] == "agent" and record[0]["copied"] == list(ours.actor)
    assert json.loads((child.run_dir / "init_from.json").read_text()) == record
    learner = child.algo.of("agent")
    optimisers = [v for v in vars(learner.policies["agent"]).values()
                  if isinstance(v, torch.optim.Optimizer)] or [learner.optimizer]
    assert all(not opt.state for opt in optimisers)  # no moments came with the weights
    parent.close()
    child.close()


def test_init_parts_all_copies_the_critic_and_statistics_too(tmp_path):
    source = _source(tmp_path, "ippo", ["algo.norm_obs=true"])
    child = _experiment(tmp_path, [*SPREAD, "algo.name=ippo", *ALGOS["ippo"], "train.seed=3",
                                   "algo.norm_obs=true", f"policies.agent.init_from={source}",
                                   "policies.agent.init_parts=all"])
    record = warm_start(child.algo, child.specs, requests(child.cfg, child.specs))
    assert set(record[0]["copied"]) >= {"actor", "obs_norm", "critic"}
    child.close()


def test_a_trained_run_starts_from_its_parent_and_records_it(tmp_path):
    source = _source(tmp_path, "ippo")
    run = tmp_path / "child"
    train(load([], [*SPREAD, "algo.name=ippo", *ALGOS["ippo"], "train.seed=5",
                    f"policies.agent.init_from={source}"]), run)
    record = json.loads((run / "init_from.json").read_text())
    assert record[0]["run"] == str(source) and record[0]["checkpoint"].startswith(str(source))
    assert read_metrics(run)


@pytest.mark.parametrize(("extra", "message"), [
    (["algo.name=ippo", "algo.rollout=8", "algo.model.hidden=[32]"],
     r"actor\..*\(16, .*\) there, \(32, .*\) here"),
    (["algo.name=dqn", "algo.learning_starts=1000"], "trained by ippo"),
    (["algo.name=ippo", "algo.rollout=8", "env.kwargs.N=2"], "was trained on"),
])
def test_a_mismatch_is_named_before_any_step(tmp_path, capsys, extra, message):
    source = _source(tmp_path, "ippo")
    run = tmp_path / "child"
    args = ["train", "-s", f"policies.agent.init_from={source}", "--run-dir", str(run)]
    for o in [*SPREAD, *extra]:
        args += ["-s", o]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "policies.agent.init_from" in err
    assert re.search(message, err), err
    assert not (run / "metrics.jsonl").exists()


def test_a_missing_source_or_policy_is_named(tmp_path):
    source = _source(tmp_path, "ippo")
    cfg = [*SPREAD, "algo.name=ippo", *ALGOS["ippo"]]
    with pytest.raises(PolicyLoadError, match="no such run folder"):
        train(load([], [*cfg, f"policies.agent.init_from={tmp_path / 'nowhere'}"]), tmp_path / "a")
    with pytest.raises(PolicyLoadError, match="has no policy 'nobody'"):
        train(load([], [*cfg, f"policies.agent.init_from={source}:nobody"]), tmp_path / "b")


def test_init_from_is_for_trainable_policies():
    with pytest.raises(ConfigError, match="init_from starts a trainable policy"):
        load([], ["policies.agent.type=random", "policies.agent.init_from=runs/x"])


def test_a_league_starts_from_a_self_play_run(tmp_path):
    ttt = ["env.id=pettingzoo.classic.tictactoe_v3", "train.self_play=true", "algo.name=dqn",
           "algo.learning_starts=1000", "env.num_envs=2", "algo.model.hidden=[16]", *QUIET]
    source = tmp_path / "selfplay"
    train(load([], [*ttt, "train.steps=30"]), source)
    run = tmp_path / "league"
    train(load([], [*ttt, "train.steps=30", "train.seed=9", "league.snapshot_every=1000",
                    f"policies.shared.init_from={source}"]), run)
    first = torch.load(run / "league" / "snapshot_0.pt", weights_only=True)
    from interplay.experiment.run_store.statecodec import decode
    parent = load_checkpoint(latest_valid(source))[0]["algo"]["policies"]["shared"]["online"]
    snap = decode(first)["policies"]["shared"]["online"]
    assert all(torch.equal(parent[k], snap[k]) for k in parent)


def test_a_searchs_first_generation_starts_from_a_run(tmp_path):
    from interplay.population.hpo import Search

    source = _source(tmp_path, "dqn")
    cfg = load([], [*SPREAD, "algo.name=dqn", *ALGOS["dqn"], "algo.learning_starts=8", "hpo.population=2",
                    "hpo.generations=1", "hpo.evo_steps=10", f"hpo.init_from={source}"])
    search = Search(cfg, tmp_path / "search")
    search.populate()
    parent = load_checkpoint(latest_valid(source))[0]["algo"]["policies"]["agent"]["online"]
    for member in search.members:
        ours = member.exp.algo.of("agent").policies["agent"].online.state_dict()
        assert all(torch.equal(parent[k], ours[k]) for k in parent)
        assert (member.exp.run_dir / "init_from.json").is_file()
        member.exp.close()

"""What a checkpoint records about the run that wrote it, and what resume and eval do with it:
another algorithm or networks of other shapes are refused by name before any step, a changed
number of env copies works, subprocess envs resume with a warning, callbacks keep their state."""

from __future__ import annotations

import warnings

import pytest
import torch
from helpers import read_metrics

from interplay import Callbacks
from interplay.cli import main
from interplay.config.loading import load
from interplay.errors import ConfigError
from interplay.experiment.evaluate import evaluate
from interplay.experiment.loop import Experiment, resume, train
from interplay.experiment.run_store.checkpoint import list_checkpoints, load_checkpoint
from interplay.experiment.run_store.resume_check import CheckpointMismatchError

QUIET = ["log.console=false", "log.curve=false", "log.tensorboard=false"]


def _run(tmp_path, name, *settings):
    run = tmp_path / name
    train(load([], ["env.id=spread", "env.num_envs=2", "train.steps=120", "log.every=60",
                    "checkpoint.every=60", *QUIET, *settings]), run)
    return run


def _saved(run):
    """Everything a refused resume must leave as it was."""
    return ((run / "metrics.jsonl").read_bytes(), (run / "config.yaml").read_bytes(),
            [(p.name, (p / "state.pt").read_bytes()) for p in list_checkpoints(run)])


def test_the_checkpoint_records_algorithm_settings_and_version(tmp_path):
    run = _run(tmp_path, "ippo", "algo.name=ippo", "algo.lr=0.002")
    state, manifest = load_checkpoint(list_checkpoints(run)[-1])
    record = state["run"]
    assert record["algorithm"] == "ippo" and record["settings"]["lr"] == 0.002
    assert record["settings"]["model"]["hidden"] == [64, 64]  # a default, resolved
    assert record["interplay"] == manifest["versions"]["interplay"]
    assert record["policies"] == {"agent": ["agent_0", "agent_1", "agent_2"]}
    assert record["config"]["env"]["num_envs"] == 2


@pytest.mark.parametrize(("wrote", "asks"), [("dqn", "ippo"), ("ippo", "mappo"), ("mappo", "dqn")])
def test_another_algorithm_is_named_on_resume_and_eval(tmp_path, capsys, wrote, asks):
    theirs = _run(tmp_path, "theirs", f"algo.name={wrote}", "algo.learning_starts=10"
                  if wrote == "dqn" else "algo.rollout=20")
    ours = _run(tmp_path, "ours", f"algo.name={asks}", "algo.learning_starts=10"
                if asks == "dqn" else "algo.rollout=20")
    before = _saved(ours)
    foreign = list_checkpoints(theirs)[-1]
    for argv in (["resume", str(ours), "-s", "train.steps=300"], ["eval", str(ours), "--episodes", "1"]):
        code = main([*argv, "--checkpoint", str(foreign)])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err
        assert f"written by {wrote}" in err and f"the config asks for {asks}" in err
        assert str(foreign) in err
    assert _saved(ours) == before
    with pytest.raises(CheckpointMismatchError, match=f"written by {wrote}"):
        resume(theirs, [f"algo.name={asks}", "train.steps=300"])


@pytest.mark.parametrize(("algo", "change", "key", "old", "new"), [
    ("ippo", "algo.model.hidden=[32]", "algo.model.hidden", "[64, 64]", "[32]"),
    ("ippo", "algo.share_params=false", "algo.share_params", "True", "False"),
    ("ippo", "algo.norm_obs=false", "algo.norm_obs", "True", "False"),
    ("mappo", "algo.centralised_critic=false", "algo.centralised_critic", "True", "False"),
    ("dqn", "algo.dueling=false", "algo.dueling", "True", "False"),
    ("dqn", "algo.model.hidden=[16, 16]", "algo.model.hidden", "[128, 128]", "[16, 16]"),
    ("dqn", "algo.buffer_size=500", "algo.buffer_size", "100000", "500"),
    ("ippo", "policies.agent.stack_size=3", "policies.agent", "(unset)", "'stack_size': 3"),
    # same shapes, other function: the saved weights would silently compute something else
    ("ippo", "algo.model.activation=relu", "algo.model.activation", "'tanh'", "'relu'"),
    ("dqn", "algo.model.activation=gelu", "algo.model.activation", "'relu'", "'gelu'"),
])
def test_a_change_that_the_saved_networks_do_not_fit_is_named(tmp_path, capsys, algo, change, key,
                                                                 old, new):
    run = _run(tmp_path, "run", f"algo.name={algo}")
    before = _saved(run)
    code = main(["resume", str(run), "-s", change, "-s", "train.steps=300"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"{key}: {old} -> " in err and new in err.split(f"{key}: {old} -> ")[1]
    assert _saved(run) == before


def test_a_changed_policy_mapping_is_named(tmp_path):
    run = _run(tmp_path, "run", "algo.name=ippo")
    with pytest.raises(CheckpointMismatchError, match=r"policies\.solo: \(unset\) -> .*agent_0"):
        resume(run, ["policies.solo.agents=[agent_0]", "policies.rest.agents=[agent_1, agent_2]",
                     "train.steps=300"])
    with pytest.raises(CheckpointMismatchError, match="holds policies"):
        evaluate(run, episodes=1, overrides=["policies.solo.agents=[agent_0]",
                                             "policies.rest.agents=[agent_1, agent_2]"])


def test_settings_that_fit_the_saved_networks_may_change(tmp_path):
    run = _run(tmp_path, "run", "algo.name=ippo")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # exact: no fresh-episodes warning
        result = resume(run, ["algo.lr=0.01", "algo.ent_coef=0", "train.steps=180"])
    assert result.env_steps == 180


@pytest.mark.parametrize("algo", ["ippo", "dqn", "maddpg"])
@pytest.mark.parametrize("copies", [1, 5])
def test_a_changed_num_envs_resumes_with_fresh_episodes(tmp_path, algo, copies):
    run = _run(tmp_path, "run", f"algo.name={algo}", "algo.learning_starts=10" if algo == "dqn"
               else "algo.learning_starts=10" if algo == "maddpg" else "algo.rollout=20")
    state, _ = load_checkpoint(list_checkpoints(run)[-1])
    cfg = load([run / "config.yaml"], [f"env.num_envs={copies}"])
    exp = Experiment(cfg, run)
    try:
        with pytest.warns(UserWarning, match=f"env.num_envs changed from 2 to {copies}"):
            exp.load_state_dict(state)
        # the learner, counters and RNGs continue
        now = exp.algo.state_dict()
        for (name, saved), (_, loaded) in zip(_flat(state["algo"]), _flat(now), strict=True):
            assert torch.equal(saved, loaded), name
        assert exp.runner.env_steps == 120 and exp.runner.episodes == state["runner"]["counters"][2]
    finally:
        exp.close()
    with pytest.warns(UserWarning, match="env.num_envs changed"):
        result = resume(run, [f"env.num_envs={copies}", "train.steps=240"])
    assert result.env_steps >= 240
    rows = read_metrics(run)
    steps = [r["env_steps"] for r in rows if r["phase"] == "train"]
    assert steps[:2] == [60, 120] and steps == sorted(steps) and steps[-1] >= 240
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new number of copies is now the run's own: exact
        assert resume(run, [f"env.num_envs={copies}", "train.steps=300"]).env_steps >= 300


def _flat(obj, where=""):
    if isinstance(obj, torch.Tensor):
        return [(where, obj)]
    if isinstance(obj, dict):
        return [x for k, v in obj.items() for x in _flat(v, f"{where}.{k}")]
    if isinstance(obj, list | tuple):
        return [x for i, v in enumerate(obj) for x in _flat(v, f"{where}[{i}]")]
    return []


def test_a_changed_num_envs_works_for_pettingzoo_copies(tmp_path):
    run = tmp_path / "run"
    common = ["env.id=mpe2.simple_spread_v3", "env.kwargs.max_cycles=10", "algo.name=ippo",
              "algo.rollout=10", *QUIET]
    train(load([], [*common, "env.num_envs=3", "train.steps=150", "log.every=50"]), run)
    with pytest.warns(UserWarning, match="env.num_envs changed from 3 to 2"):
        result = resume(run, ["env.num_envs=2", "train.steps=300"])
    assert result.env_steps == 300


def test_subprocess_envs_resume_with_a_warning_naming_why(tmp_path):
    run = tmp_path / "run"
    common = ["env.id=faulty_envs:flaky_counter", "env.kwargs.p=0", "env.num_envs=2", *QUIET]
    train(load([], [*common, "train.steps=60"]), run)
    with pytest.warns(UserWarning, match="async: the env copies live in worker processes"):
        result = resume(run, ["train.steps=120", "env.vectorization=async", "env.num_workers=1"])
    assert result.env_steps == 120
    state, _ = load_checkpoint(list_checkpoints(run)[-1])
    assert state["env"] is None
    with pytest.warns(UserWarning, match="env.vectorization changed from 'async' to 'sync'"):
        assert resume(run, ["train.steps=140", "env.vectorization=sync"]).env_steps == 140


class CountEpisodes(Callbacks):
    """Keeps a count of finished episodes and the returns seen, across checkpoints."""

    def __init__(self):
        self.user_data = {"episodes": 0, "returns": []}

    def on_episode_end(self, *, episode, env_index, runner):
        self.user_data["episodes"] += 1
        self.user_data["returns"].append(round(float(sum(episode.returns.values())), 4))

    def state_dict(self):
        return {"user_data": self.user_data}

    def load_state_dict(self, state):
        self.user_data = state["user_data"]


class Stateless(Callbacks):
    pass


def test_callback_state_is_saved_and_restored(tmp_path):
    common = ["env.id=spread", "env.num_envs=2", "log.every=100", *QUIET]
    straight = CountEpisodes()
    train(load([], [*common, "train.steps=400"]), tmp_path / "straight", callbacks=[straight])
    train(load([], [*common, "train.steps=200"]), tmp_path / "split", callbacks=[CountEpisodes()])
    state, _ = load_checkpoint(list_checkpoints(tmp_path / "split")[-1])
    assert state["callbacks"]["callbacks"][0]["state"]["user_data"]["episodes"] > 0
    resumed = CountEpisodes()
    resume(tmp_path / "split", ["train.steps=400"], callbacks=[Stateless(), resumed])
    assert resumed.user_data == straight.user_data and straight.user_data["episodes"] > 4
    with pytest.raises(ConfigError, match="CountEpisodes"):
        resume(tmp_path / "split", ["train.steps=500"], callbacks=[Stateless()])


def test_callbacks_without_state_save_nothing_and_need_nothing():
    cb = Callbacks()
    assert cb.state_dict() == {}
    cb.load_state_dict({})


class HoldsALock(Callbacks):
    def state_dict(self):
        import threading

        return {"guard": threading.Lock()}


def test_callback_state_that_cannot_be_checkpointed_is_named(tmp_path, capsys):
    from interplay.experiment.run_store.checkpoint import CheckpointError

    run = tmp_path / "run"
    settings = ["env.id=spread", "env.num_envs=2", "train.steps=100", "checkpoint.every=50", *QUIET]
    with pytest.raises(CheckpointError, match=r"cannot write the checkpoint of step 50 in .*run: "
                                              r".*\['guard'\]: _thread.lock cannot be checkpointed"):
        train(load([], settings), run, callbacks=[HoldsALock()])
    assert (run / "config.yaml").exists() and not list_checkpoints(run)

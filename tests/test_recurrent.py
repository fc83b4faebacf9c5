"""Recurrent policies: the cell's state per agent, reset at episode starts, trained on pieces
of each agent's sequence that never span two episodes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import read_metrics

from interplay.config.loading import load
from interplay.config.model import ModelSettings
from interplay.data.rollout import RolloutStorage
from interplay.errors import ConfigError
from interplay.experiment.evaluate import evaluate
from interplay.experiment.loop import train
from interplay.nets.recurrent import recurrent_net
from interplay.run.transitions import Transitions


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_a_sequence_equals_stepping_with_resets_and_idle_cells(kind):
    torch.manual_seed(0)
    net = recurrent_net(ModelSettings(hidden=[8], recurrent=kind, recurrent_size=5), [(3, 1)], 2,
                        1.0, "algo.model")
    L, B = 6, 4
    x = torch.randn(L, B, 3)
    first = torch.rand(L, B) < 0.3
    valid = torch.rand(L, B) < 0.8
    start = torch.randn(B, net.state_size)
    out, states = net.sequence(x, start, first, valid)
    state = start
    for t in range(L):
        assert torch.allclose(states[t], state, atol=1e-6)
        y, new = net.step(x[t], state, first[t])
        assert torch.allclose(out[t], y, atol=1e-5)
        state = torch.where(valid[t].unsqueeze(1), new, state)
    assert torch.allclose(states[L], state, atol=1e-6)


def test_pieces_never_span_two_episodes_and_keep_their_length():
    storage = RolloutStorage({"p": 2}, 1)
    firsts = [[True, False, False, False, False, True, False], [True, False, True]]
    for j, flags in enumerate(firsts):
        for f in flags:
            storage.add("p", Transitions(
                obs=np.zeros((1, 1), np.float32), action=np.zeros(1, np.int64),
                reward=np.zeros(1), next_obs=np.zeros((1, 1), np.float32),
                terminated=np.zeros(1, bool), truncated=np.zeros(1, bool),
                env=np.zeros(1, int), slot=np.array([j]), mask=None, next_mask=None, extras={},
                step=np.zeros(1, int), first=np.array([f])))
    r = storage.rollout("p")
    piece, offset, n = r.pieces(3)
    # Agent 0: 7 cells, episodes of 5 and 2 -> pieces 3+2, 2; agent 1: 2 and 1.
    assert n == 5
    assert piece[:7, 0, 0].tolist() == [0, 0, 0, 1, 1, 2, 2]
    assert offset[:7, 0, 0].tolist() == [0, 1, 2, 0, 1, 0, 1]
    assert piece[:3, 0, 1].tolist() == [3, 3, 4]


def _quick(tmp_path, name, *extra):
    cfg = load([], ["algo.name=ippo", "env.id=interplay.envs.recall", "env.num_envs=4",
                    "algo.model.recurrent=gru",
                    "algo.rollout=24", "algo.model.seq_len=8", "algo.epochs=1", "train.steps=400",
                    "train.test_frequency=200", "train.test_episodes=4", "log.console=false",
                    "log.tensorboard=false", "log.curve=false", *extra])
    return train(cfg, tmp_path / name), tmp_path / name


def test_a_recurrent_run_tests_and_evaluates_with_its_state(tmp_path):
    _, run = _quick(tmp_path, "gru")
    rows = read_metrics(run)
    assert any(r["phase"] == "test" for r in rows)
    out = evaluate(run, episodes=6)
    assert 0.0 <= out["episode_return_mean"] <= 2.0


@pytest.mark.parametrize("extra", [["algo.name=mappo", "algo.model.recurrent=lstm"],
                                   ["env.id=pettingzoo.classic.tictactoe_v3", "env.num_envs=2"]])
def test_mappo_and_turn_based_recurrent_runs_finish(tmp_path, extra):
    result, _ = _quick(tmp_path, "run", *extra)
    assert result.env_steps == 400


def test_recurrent_policies_with_a_network_per_agent_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="algo.share_params"):
        _quick(tmp_path, "x", "algo.share_params=false")


@pytest.mark.slow
@pytest.mark.learning
def test_the_gru_preset_recalls_the_cue_where_an_mlp_stays_at_chance(tmp_path, learning_result):
    def score(name, *extra):
        cfg = load(["configs/ippo_recall_gru.yaml"],
                   ["log.console=false", "log.tensorboard=false", "log.curve=false", *extra])
        train(cfg, tmp_path / name)
        tests = [r for r in read_metrics(tmp_path / name) if r["phase"] == "test"]
        return tests[-1]["episode_return_mean"] / 2  # per agent: the share of cues recalled

    gru, mlp = score("gru"), score("mlp", "algo.model.recurrent=none", "train.steps=60000")
    learning_result(env="recall", algo="ippo (gru preset; mlp for 60k)", steps=150_000,
                    score=gru, random=0.25, mlp=mlp)
    assert gru >= 0.9
    assert mlp < 0.4  # chance: 0.25

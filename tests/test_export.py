"""``interplay export``: TorchScript and ONNX files act as ``load_policy`` does."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import interplay
from interplay.cli import main
from interplay.config.loading import load
from interplay.experiment.export import ExportError, export_policy
from interplay.experiment.loop import train

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
RUNS = {
    # a Box observation, discrete actions; observation statistics in the module
    "ippo_spread": ["env.id=spread", "algo.name=ippo", "algo.rollout=16", "algo.norm_obs=true"],
    # a recurrent policy: the state goes in and comes out
    "gru_spread": ["env.id=spread", "algo.name=ippo", "algo.rollout=16",
                   "algo.model.recurrent=gru", "algo.model.seq_len=4"],
    # a Dict observation with an action mask, turn-based
    "dqn_tictactoe": ["env.id=pettingzoo.classic.tictactoe_v3", "train.self_play=true",
                      "algo.name=dqn", "algo.learning_starts=16", "algo.batch_size=8"],
    "vdn_spread": ["env.id=spread", "algo.name=vdn", "algo.learning_starts=16", "algo.batch_size=8"],
    # Box actions within the env's bounds
    "isac_continuous": ["env.id=mpe2.simple_spread_v3", "env.kwargs.continuous_actions=true",
                        "env.kwargs.max_cycles=10", "algo.name=isac", "algo.learning_starts=16",
                        "algo.batch_size=8"],
    "ppo_continuous": ["env.id=mpe2.simple_spread_v3", "env.kwargs.continuous_actions=true",
                       "env.kwargs.max_cycles=10", "algo.name=ippo", "algo.rollout=16"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    out = {}
    for name, extra in RUNS.items():
        out[name] = root / name
        train(load([], [*extra, "train.steps=64", "env.num_envs=2", "algo.model.hidden=[16]",
                        *QUIET]), out[name])
    return out


def _observations(policy, n: int, rng: np.random.Generator):
    """``n`` observations from the policy's own space (with legal-action masks), as the env
    gives them and as the exported file takes them."""
    space = policy.observation_space
    space.seed(int(rng.integers(2**31)))
    given, flat, masks = [], [], []
    for _ in range(n):
        obs = space.sample()
        if isinstance(obs, dict):
            mask = np.asarray(obs["action_mask"], bool).copy()
            mask[int(rng.integers(len(mask)))] = True  # at least one legal move
            obs = {**obs, "action_mask": mask.astype(np.int8)}
            masks.append(mask)
            flat.append(np.concatenate([np.asarray(v, np.float32).ravel()
                                        for k, v in obs.items() if k != "action_mask"]))
        else:
            obs = np.clip(obs, -5, 5)  # an unbounded Box samples huge values
            flat.append(np.asarray(obs, np.float32))
        given.append(obs)
    return given, np.stack(flat), (np.stack(masks) if masks else None)


def _mask_input(policy, masks, n):
    if policy.spec.action_view.kind == "box":
        return []
    width = policy.spec.action_view.mask_dim
    return [masks if masks is not None else np.ones((n, width), bool)]


def _expected(policy, given, steps: int = 1):
    if policy.actor.__class__.__name__ == "OnPolicyActor" and policy.actor.policy.recurrent:
        state = policy.initial_state()
        return [np.asarray(policy.act(given, state=state)) for _ in range(steps)]
    return [np.asarray(policy.act(given))]


@pytest.mark.parametrize("name", list(RUNS))
def test_torchscript_acts_as_load_policy(runs, tmp_path, name):
    path = export_policy(runs[name], tmp_path / "policy.pt", "torchscript")
    policy = interplay.load_policy(runs[name])
    given, flat, masks = _observations(policy, 1000, np.random.default_rng(0))
    extra = {"interplay.json": ""}
    module = torch.jit.load(str(path), _extra_files=extra)
    info = json.loads(extra["interplay.json"])
    assert info["inputs"][0] == "obs" and info["policy"] == policy.id
    inputs = [torch.from_numpy(flat), *map(torch.from_numpy, _mask_input(policy, masks, 1000))]
    recurrent = name.startswith("gru")
    expected = _expected(policy, given, steps=3 if recurrent else 1)
    state = torch.zeros(1000, info["state_size"]) if recurrent else None
    for want in expected:  # a recurrent one: three steps, its state carried between them
        out = module(*inputs, *([state] if recurrent else []))
        action, state = out if recurrent else (out, None)
        if policy.spec.action_view.kind == "box":
            np.testing.assert_allclose(action.numpy(), want, atol=1e-5)
        else:
            np.testing.assert_array_equal(action.numpy(), want)


@pytest.mark.parametrize("name", ["ippo_spread", "gru_spread", "dqn_tictactoe", "isac_continuous"])
def test_onnx_acts_as_load_policy(runs, tmp_path, name):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    path = export_policy(runs[name], tmp_path / "policy.onnx", "onnx")
    policy = interplay.load_policy(runs[name])
    given, flat, masks = _observations(policy, 1000, np.random.default_rng(1))
    session = ort.InferenceSession(str(path))
    names = [i.name for i in session.get_inputs()]
    feeds = dict(zip(names, [flat, *_mask_input(policy, masks, 1000)], strict=False))
    recurrent = "state" in names
    expected = _expected(policy, given, steps=3 if recurrent else 1)
    state = None
    if recurrent:
        width = session.get_inputs()[names.index("state")].shape[1]
        state = np.zeros((1000, width), np.float32)
    for want in expected:
        if recurrent:
            feeds["state"] = state
        out = session.run(None, feeds)
        action = out[0]
        state = out[1] if recurrent else None
        if policy.spec.action_view.kind == "box":
            np.testing.assert_allclose(action, want, atol=1e-5)
        else:
            np.testing.assert_array_equal(action, want)


def test_the_cli_exports_and_names_what_is_wrong(runs, tmp_path, capsys):
    out = tmp_path / "p.pt"
    assert main(["export", str(runs["ippo_spread"]), "--out", str(out)]) == 0
    assert out.is_file()
    assert main(["export", str(runs["ippo_spread"]), "--policy", "nobody",
                 "--out", str(tmp_path / "q.pt")]) == 2
    assert "has no policy 'nobody'" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "nowhere"), "--out", str(tmp_path / "q.pt")]) == 2
    assert not (tmp_path / "q.pt").exists()


def test_a_policy_that_stacks_frames_is_refused(tmp_path):
    run = tmp_path / "stacked"
    train(load([], ["env.id=spread", "algo.name=ippo", "algo.rollout=8", "train.steps=16",
                    "policies.agent.stack_size=2", *QUIET]), run)
    with pytest.raises(ExportError, match="stacks frames"):
        export_policy(run, tmp_path / "p.pt")

"""Per-agent networks as one batched module over the agent axis (``interplay.nets.agents``):
the same outputs, initial weights and gradients as one network per agent, over full grids of
rows and ragged ones; shared networks as before; per-agent policies through training, resume,
load_policy, export and warm starts."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import read_metrics, straight_and_resumed
from torch import nn

import interplay
from interplay.config.loading import load
from interplay.config.model import ModelSettings
from interplay.config.validation import validate
from interplay.experiment.build import make_algorithm, make_specs, make_vec_env
from interplay.experiment.export import export_policy
from interplay.experiment.loop import resume, train
from interplay.experiment.policies import load_run
from interplay.experiment.run_store.statecodec import decode, encode
from interplay.nets.agents import (
    AgentStack,
    SharedNet,
    agent_nets,
    stack_saved_nets,
    stacked_optimizer_state,
)
from interplay.nets.mlp import ACTIVATIONS, mlp

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
K, IN, OUT = 4, 5, 3


def separate_and_stacked(model: ModelSettings, k: int = K, seed: int = 0
                         ) -> tuple[list[nn.Module], AgentStack]:
    """``k`` networks made one by one, and the stack made from the same seed."""
    torch.manual_seed(seed)
    nets = [mlp(IN, OUT, model, 0.01) for _ in range(k)]
    torch.manual_seed(seed)
    stack = agent_nets(lambda: mlp(IN, OUT, model, 0.01), k, shared=False)
    assert isinstance(stack, AgentStack)
    return nets, stack


def one_by_one(nets: list[nn.Module], x: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
    return torch.cat([nets[j](x[i:i + 1]) for i, j in enumerate(slot.tolist())])


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("layer_norm", [False, True])
def test_a_full_grid_gives_what_separate_networks_give(activation, layer_norm):
    nets, stack = separate_and_stacked(ModelSettings(hidden=[16, 8], activation=activation,
                                                     layer_norm=layer_norm))
    # the same initial weights, agent by agent, as k separate calls of mlp(...)
    for j, net in enumerate(nets):
        for name, p in net.named_parameters():
            assert torch.equal(stack.net.get_parameter(name)[j], p)
    x = torch.randn(6 * K, IN)
    slot = torch.arange(K).repeat(6)
    want = one_by_one(nets, x, slot)
    torch.testing.assert_close(stack(x, slot), want)
    torch.testing.assert_close(stack(x), want)  # no slots: a full grid, copy by copy
    torch.testing.assert_close(stack.over_agents(x.view(6, K, IN)), want.view(6, K, OUT))


@pytest.mark.parametrize("case", ["missing", "one_mover", "shuffled", "one_agent", "empty"])
def test_ragged_rows_give_what_separate_networks_give(case):
    nets, stack = separate_and_stacked(ModelSettings(hidden=[16], layer_norm=True))
    rng = np.random.default_rng(1)
    copies = 5
    grid = torch.arange(K).repeat(copies)
    if case == "missing":  # agents absent in some copies (dead, not yet joined)
        slot = grid[torch.from_numpy(rng.random(len(grid)) < 0.6)]
    elif case == "one_mover":  # a turn-based step: one agent per copy
        slot = torch.from_numpy(rng.integers(0, K, copies))
    elif case == "shuffled":  # a minibatch of a rollout
        slot = grid[torch.from_numpy(rng.permutation(len(grid)))]
    elif case == "one_agent":
        slot = torch.tensor([2])
    else:
        slot = torch.zeros(0, dtype=torch.long)
    x = torch.randn(len(slot), IN)
    got = stack(x, slot)
    assert got.shape == (len(slot), OUT)
    torch.testing.assert_close(got, one_by_one(nets, x, slot) if len(slot) else got)


def test_gradients_reach_each_agents_own_slice_only():
    nets, stack = separate_and_stacked(ModelSettings(hidden=[8]))
    x = torch.randn(7, IN)
    slot = torch.tensor([1, 3, 1, 1, 3, 1, 3])
    (stack(x, slot) ** 2).sum().backward()
    (one_by_one(nets, x, slot) ** 2).sum().backward()
    for name, p in stack.net.named_parameters():
        assert p.grad is not None
        for j in range(K):
            theirs = nets[j].get_parameter(name).grad
            if j in (1, 3):
                torch.testing.assert_close(p.grad[j], theirs)
            else:
                assert theirs is None and not p.grad[j].any()


def test_shared_parameters_are_one_network_as_before():
    model = ModelSettings(hidden=[8])
    torch.manual_seed(0)
    plain = mlp(IN, OUT, model, 1.0)
    for k, shared in ((3, True), (1, False)):  # one agent alone needs no stack
        torch.manual_seed(0)
        net = agent_nets(lambda: mlp(IN, OUT, model, 1.0), k, shared)
        assert isinstance(net, SharedNet) and not net.per_agent
        assert list(net.state_dict()) == [f"nets.0.{name}" for name in plain.state_dict()]
        x = torch.randn(6, IN)
        assert torch.equal(net(x, torch.arange(6) % k), plain(x))
        assert torch.equal(net.over_agents(x.view(2, 3, IN)), plain(x).view(2, 3, OUT))


class Frames(nn.Module):
    """Rows as 2x4x4 images through a conv layer: not a plain MLP."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x.reshape(-1, 2, 4, 4)).flatten(1)


class Branchy(Frames):
    """Looks at its input's values: vmap cannot run it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        return y if float(x.abs().max()) < 1e6 else y * 0


@pytest.mark.parametrize(("block", "runs"), [(Frames, "vmap"), (Branchy, "loop")])
def test_other_modules_run_over_agents_with_vmap_or_one_by_one(block, runs):
    def make() -> nn.Module:
        return nn.Sequential(block(), nn.ReLU(), nn.Linear(12, 2))

    torch.manual_seed(0)
    nets = [make() for _ in range(K)]
    torch.manual_seed(0)
    stack = agent_nets(make, K, shared=False)
    for slot in (torch.arange(K).repeat(3), torch.tensor([3, 0, 3, 3, 1])):
        x = torch.randn(len(slot), 32)
        torch.testing.assert_close(stack(x, slot), one_by_one(nets, x, slot))
    assert stack.steps[0][0] == runs


def test_weights_saved_one_network_per_agent_read_as_stacks():
    model = ModelSettings(hidden=[8])
    nets, _ = separate_and_stacked(model, seed=1)
    _, stack = separate_and_stacked(model, seed=2)
    old = {f"nets.{j}.{name}": t for j, net in enumerate(nets)
           for name, t in net.state_dict().items()}
    shared = {"nets.0.0.weight": torch.ones(2, 2)}
    saved = stack_saved_nets({"algo": {"actor": old, "shared": shared}})
    assert saved["algo"]["shared"] == shared  # one network for all keeps its keys
    stack.load_state_dict(saved["algo"]["actor"])
    x, slot = torch.randn(8, IN), torch.arange(K).repeat(2)
    torch.testing.assert_close(stack(x, slot), one_by_one(nets, x, slot))
    # and an optimiser's moments, saved parameter by parameter, as the stacks' moments
    opt = torch.optim.Adam([p for net in nets for p in net.parameters()])
    sum(net(x).sum() for net in nets).backward()
    opt.step()
    ours = torch.optim.Adam(stack.parameters())
    ours.load_state_dict(stacked_optimizer_state(opt.state_dict(), [stack]))
    first = ours.state_dict()["state"][0]["exp_avg"]
    assert first.shape == stack.net[0].weight.shape
    torch.testing.assert_close(first[2], opt.state_dict()["state"][2 * 4]["exp_avg"])


def test_a_run_saved_with_one_network_per_agent_resumes_as_a_run_of_stacks(tmp_path):
    """``data/per_agent_nets_v0``: 64 steps of per-agent IPPO saved before the networks were
    stacked. It resumes to 128 steps with the weights it saved, as stacks, and reports what a
    run of stacks reports. (Its actions were drawn with the sampler of its day, so its numbers
    are not a straight run's of today.)"""
    common = ["env.id=spread", "env.num_envs=2", "algo.model.hidden=[16]",
              "algo.share_params=false", "log.every=32", "algo.name=ippo", "algo.rollout=16",
              *QUIET]
    old = tmp_path / "old"
    shutil.copytree(Path(__file__).parent / "data" / "per_agent_nets_v0", old)
    saved = decode(torch.load(next(old.glob("checkpoints/*/state.pt")), weights_only=True))
    nets = saved["algo"]["policies"]["agent"]["actor"]
    obs = np.random.default_rng(0).normal(size=(6, 18)).astype(np.float32)
    before = interplay.load_policy(old).act(obs)
    resume(old, ["train.steps=128"])
    train(load([], [*common, "train.steps=128"]), tmp_path / "straight")
    timing = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}
    rows = [[{k: v for k, v in r.items() if k not in timing} for r in read_metrics(run)]
            for run in (old, tmp_path / "straight")]
    assert len(rows[0]) == len(rows[1]) == 4
    for a, b in zip(*rows, strict=True):
        assert a.keys() == b.keys() and a["env_steps"] == b["env_steps"]
        assert all(np.isfinite(v) for v in a.values() if isinstance(v, float))
    # the agents' saved weights became the stacks, agent j at row j
    stack = stack_saved_nets(nets)
    for name, value in stack.items():
        if name.startswith("net."):
            for j in range(value.shape[0]):
                torch.testing.assert_close(value[j], nets[f"nets.{j}.{name[4:]}"])
    assert before.shape == (6,)


def test_a_league_snapshot_saved_with_one_network_per_agent_acts_as_its_run(tmp_path):
    run = tmp_path / "old"
    shutil.copytree(Path(__file__).parent / "data" / "per_agent_nets_v0", run)
    saved = torch.load(next(run.glob("checkpoints/*/state.pt")), weights_only=True)
    assert "nets.2.0.0.weight" in decode(saved)["algo"]["policies"]["agent"]["actor"]
    (run / "league").mkdir()
    torch.save(encode(decode(saved)["algo"]), run / "league" / "snapshot_64.pt")
    obs = np.random.default_rng(0).normal(size=(6, 18)).astype(np.float32)
    np.testing.assert_array_equal(
        interplay.load_policy(run / "league" / "snapshot_64.pt").act(obs),
        interplay.load_policy(run).act(obs))


def _run(tmp_path: Path, name: str, algo: list[str]) -> Path:
    run = tmp_path / name
    train(load([], ["env.id=spread", "env.num_envs=2", "train.steps=64",
                    "algo.model.hidden=[16]", "algo.share_params=false", *algo, *QUIET]), run)
    return run


@pytest.mark.parametrize("algo", [["algo.name=ippo", "algo.rollout=16"],
                                  ["algo.name=qmix", "algo.learning_starts=16",
                                   "algo.batch_size=8", "algo.train_every=4"]])
def test_a_short_run_with_per_agent_networks_learns_loads_and_exports(tmp_path, algo):
    run = _run(tmp_path, "run", algo)
    rows = read_metrics(run)
    learned = [r for r in rows if "loss" in r or any(k.startswith("policy_loss") for k in r)]
    assert learned and all(np.isfinite(v) for r in learned for v in r.values()
                           if isinstance(v, float))
    loaded = load_run(run)
    learner = loaded.algo.of("agent")
    nets = learner.policies["agent"]
    net = nets.actor if hasattr(nets, "actor") else nets.online
    assert isinstance(net, AgentStack) and net.agents == 3
    # load_policy acts as agent 0's network; the exported file acts the same
    policy = interplay.load_policy(run)
    obs = np.random.default_rng(0).normal(size=(5, 18)).astype(np.float32)
    actions = policy.act(obs)
    path = export_policy(run, tmp_path / "policy.pt")
    exported = torch.jit.load(str(path))
    mask = torch.ones(5, 5, dtype=torch.bool)
    np.testing.assert_array_equal(exported(torch.from_numpy(obs), mask).numpy(), actions)


def test_a_warm_start_copies_every_agents_network(tmp_path):
    source = _run(tmp_path, "source", ["algo.name=ippo", "algo.rollout=16"])
    run = tmp_path / "warm"
    train(load([], ["env.id=spread", "env.num_envs=2", "train.steps=16", "algo.name=ippo",
                    "algo.rollout=32", "algo.model.hidden=[16]", "algo.share_params=false",
                    f"policies.agent.init_from={source}", *QUIET]), run)
    theirs = load_run(source).algo.of("agent").policies["agent"].actor
    ours = load_run(run).algo.of("agent").policies["agent"].actor
    for a, b in zip(theirs.parameters(), ours.parameters(), strict=True):
        assert torch.equal(a, b)  # no update yet: the weights as they came


@pytest.mark.parametrize("algo", [["algo.name=ippo", "algo.rollout=16"],
                                  ["algo.name=vdn", "algo.learning_starts=40",
                                   "algo.batch_size=8", "algo.train_every=4"]])
def test_a_run_with_per_agent_networks_resumes_exactly(tmp_path, algo):
    common = ["env.id=spread", "env.num_envs=2", "algo.model.hidden=[16]",
              "algo.share_params=false", "log.every=32", *algo, *QUIET]
    straight, resumed = straight_and_resumed(common, 128, tmp_path)
    assert straight == resumed and len(straight) >= 3


def test_a_gaussian_policys_log_std_is_each_agents_own():
    from interplay.nets.distributions import LogStd

    def make() -> nn.Module:
        return nn.Sequential(mlp(IN, 2, ModelSettings(hidden=[8]), 0.01), LogStd(2, -0.5))

    torch.manual_seed(0)
    nets = [make() for _ in range(K)]
    torch.manual_seed(0)
    stack = agent_nets(make, K, shared=False)
    with torch.no_grad():
        stack.net[1].log_std[2] += 1.0
        nets[2][1].log_std += 1.0
    slot = torch.tensor([2, 0, 2, 1])
    x = torch.randn(4, IN)
    torch.testing.assert_close(stack(x, slot), one_by_one(nets, x, slot))
    assert stack.steps[-1][0] == "log_std"


@pytest.mark.parametrize(("model", "runs"), [({}, "vmap"),  # a CNN
                                             ({"type": "user_nets:PooledColour"}, "loop")])
def test_per_agent_image_networks_give_what_each_agents_network_gives(model, runs):
    cfg = validate({"env": {"id": "interplay.envs.pixels", "num_envs": 2, "kwargs": {"size": 36}},
                    "algo": {"name": "mappo", "share_params": False, "model": model},
                    "log": {"console": False}})
    vec, _ = make_vec_env(cfg)
    specs = make_specs(cfg, vec)
    vec.close()
    policy = make_algorithm(cfg, specs, "cpu").policies["eye"]
    k = policy.actor.agents
    rng = np.random.default_rng(0)
    for net, dim in ((policy.actor, specs["eye"].obs_dim), (policy.critic, None)):
        dim = dim or net.net[0].in_features
        slot = torch.tensor([1, 0, 1] if k == 2 else [0, k - 1, 0])
        x = torch.from_numpy(rng.integers(0, 256, (3, dim), dtype=np.uint8))
        with torch.no_grad():
            want = torch.cat([net.agent(j)(x[i:i + 1]) for i, j in enumerate(slot.tolist())])
            torch.testing.assert_close(net(x, slot), want)
        assert net.steps[0][0] == runs

"""``critic_model.type: attention``: critics (and QMIX's mixer) that attend across the agents.

The network itself: permuting a group's agents permutes its outputs, an absent agent's token
changes no present agent's output, and a row with nobody present gives zeros, not NaN. Then the
algorithms, driven by their declared ``attention_critic``: each that declares it builds and
updates with one (MAPPO also where agents die mid-episode and where their number changes from
one episode to the next), resumes exactly, and every other refuses the key by name.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_cfg, untimed_metrics

from interplay import ConfigError, resume, train
from interplay.algos import REGISTRY
from interplay.algos.attention_mixer import AttentionMixer
from interplay.cli import main
from interplay.config.critic_model import CriticModelSettings
from interplay.nets.attention import AgentAttention, OwnTokenCritic, TokenLayout

SMALL = CriticModelSettings(type="attention", embed=8, heads=2, layers=2, hidden=[8])
LAYOUT = TokenLayout(((3, 4, 2), (2, 5, 0)), lead=3)
"""Two groups: three agents seeing 4 numbers and acting with 2, two seeing 5 and not acting."""

ATTENTION = ["algo.critic_model.type=attention", "algo.critic_model.embed=8",
             "algo.critic_model.heads=2", "algo.critic_model.layers=1",
             "algo.critic_model.hidden=[8]"]
TINY = {"rollout": 8, "epochs": 1, "minibatches": 2, "learning_starts": 16, "train_every": 8,
        "batch_size": 8, "buffer_size": 500, "target_every": 10, "mixer_hidden": 8,
        "model": "{hidden: [8]}"}
"""Small settings, each given to the algorithms whose settings have that key."""
DYING = ["env.id=interplay.envs.toy:shifting_crowd"]
"""Agents that join late and die mid-episode."""
VARYING = ["env.id=interplay.envs.toy:shifting_crowd", "env.kwargs.max_steps=5",
           "env.kwargs.schedule={choice: [{a_0: [0, 9], a_1: [0, 9], a_2: [0, 9]}, "
           "{a_0: [0, 9], a_1: [9, 9], a_2: [9, 9]}]}"]
"""Three agents in some episodes, one in others (the other two never arrive)."""


def short(algo: str, steps: int = 80) -> list[str]:
    """``algo`` with attention, on :data:`TINY`'s settings, for ``steps`` env steps."""
    fields = REGISTRY[algo].Settings.model_fields
    return [f"algo.name={algo}", *ATTENTION, "env.num_envs=2", "log.every=16",
            f"train.steps={steps}", *(f"algo.{k}={v}" for k, v in TINY.items() if k in fields)]


def attention_net(seed: int = 0) -> AgentAttention:
    torch.manual_seed(seed)
    return AgentAttention(LAYOUT, SMALL, 2, 1.0)


def rows(n: int, live: list[int] | None = None) -> torch.Tensor:
    x = torch.randn(n, LAYOUT.width, generator=torch.Generator().manual_seed(1))
    x[:, -LAYOUT.tokens:] = torch.tensor(live or [1] * LAYOUT.tokens, dtype=x.dtype)
    return x


def permuted(x: torch.Tensor, order: list[int]) -> torch.Tensor:
    """Rows with the first group's agents (observation, action, live flag) in ``order``."""
    y = x.clone()
    lead, k = LAYOUT.lead, 3
    obs = x[:, lead:lead + k * 4].reshape(-1, k, 4)
    act_at = lead + k * 4 + 2 * 5
    act = x[:, act_at:act_at + k * 2].reshape(-1, k, 2)
    live_at = LAYOUT.width - LAYOUT.tokens
    y[:, lead:lead + k * 4] = obs[:, order].reshape(-1, k * 4)
    y[:, act_at:act_at + k * 2] = act[:, order].reshape(-1, k * 2)
    y[:, live_at:live_at + k] = x[:, live_at:live_at + k][:, order]
    return y


def test_permuting_a_groups_agents_permutes_the_outputs_alike():
    net, x, order = attention_net(), rows(5, [1, 0, 1, 1, 1]), [2, 0, 1]
    out, out_permuted = net(x), net(permuted(x, order))
    assert torch.allclose(out_permuted[:, :3], out[:, order], atol=1e-5)
    assert torch.allclose(out_permuted[:, 3:], out[:, 3:], atol=1e-5)


def test_an_absent_agents_token_changes_no_present_agents_output():
    net, x = attention_net(), rows(4, [1, 0, 1, 0, 1])
    y = x.clone()
    lead = LAYOUT.lead
    y[:, lead + 4:lead + 8] = 1e3  # agent 1's observation: absent, so it must not count
    y[:, lead + 12 + 10 + 2:lead + 12 + 10 + 4] = -7.0  # and its action
    out, changed = net(x), net(y)
    assert torch.equal(out, changed)
    assert torch.equal(out[:, [1, 3]], torch.zeros(4, 2, 2))


@pytest.mark.parametrize("grad", [True, False])
def test_a_row_with_nobody_present_gives_zeros_not_nan(grad):
    net = attention_net()
    x = torch.cat([rows(2, [0] * 5), rows(2)])
    with torch.set_grad_enabled(grad):
        out = net.eval()(x) if not grad else net(x)
    assert torch.isfinite(out).all()
    assert torch.equal(out[:2], torch.zeros(2, 5, 2))
    mixer = AttentionMixer(TokenLayout(((3, 4, 0),)), SMALL, 4)
    q = torch.randn(3, 3)
    total = mixer(q, torch.randn(3, 12), torch.tensor([[0.0] * 3, [1, 0, 1], [1, 1, 1]]))
    assert torch.isfinite(total).all()


def test_the_own_token_critic_values_each_rows_own_agent():
    torch.manual_seed(0)
    layout = TokenLayout(((3, 4, 2), (2, 5, 0)), lead=3 + 3, slot_at=3)
    critic = OwnTokenCritic(layout, SMALL, 1, 1.0)
    x = torch.randn(3, layout.width)
    x[:, 3:6] = torch.eye(3)  # row j is agent j's
    x[:, -5:] = 1.0
    every = critic.attention(x)  # [rows, agents, 1]
    assert torch.allclose(critic(x), every[torch.arange(3), torch.arange(3)])
    slots = torch.tensor([2, 0, 1])
    assert torch.allclose(critic(x, slots), every[torch.arange(3), slots])


def test_the_attention_mixer_is_monotone_in_every_agents_q():
    torch.manual_seed(0)
    mixer = AttentionMixer(TokenLayout(((3, 4, 0),)), SMALL, 4)
    q = torch.randn(16, 3, requires_grad=True)
    live = (torch.rand(16, 3) > 0.3).float()
    mixer(q, torch.randn(16, 12), live).sum().backward()
    assert q.grad is not None
    assert (q.grad >= 0).all()
    assert torch.equal(q.grad[live == 0], torch.zeros(int((live == 0).sum())))


TAKERS = sorted(n for n, cls in REGISTRY.items() if cls.attention_critic)
OTHERS = sorted(n for n, cls in REGISTRY.items() if not cls.attention_critic)


def test_the_centralised_learners_declare_an_attention_critic():
    assert set(TAKERS) >= {"mappo", "maddpg", "matd3", "masac", "qmix"}
    assert {"ippo", "isac", "vdn", "dqn"} <= set(OTHERS)


@pytest.mark.parametrize("algo", ["maddpg", "masac"])
def test_box_actions_and_two_groups_of_their_own_spaces(algo, tmp_path):
    result = train(tiny_cfg("env.id=speaker_listener", "env.kwargs.continuous_actions=true",
                            *short(algo)), tmp_path)
    assert any(k.startswith("critic_loss/") for r in result.rows for k in r)


@pytest.mark.parametrize("env", [DYING, VARYING], ids=["dying", "count_changes"])
def test_mappo_learns_where_agents_die_or_their_number_changes(env, tmp_path):
    result = train(tiny_cfg(*env, *short("mappo")), tmp_path)
    updated = [r for r in result.rows if "value_loss/a" in r]
    assert updated
    assert all(torch.isfinite(torch.tensor([r["value_loss/a"], r["explained_variance/a"]])).all()
               for r in updated)


def test_qmix_mixes_agents_that_die(tmp_path):
    result = train(tiny_cfg(*DYING, *short("qmix")), tmp_path)
    assert any("loss" in r for r in result.rows)


# Every learner that takes it resumes exactly on spread in tests/test_algo_matrix.py; here,
# where agents die.
@pytest.mark.parametrize("algo,env", [("mappo", DYING), ("qmix", DYING)])
def test_resume_is_exact(algo, env, tmp_path):
    train(tiny_cfg(*env, *short(algo)), tmp_path / "straight")
    train(tiny_cfg(*env, *short(algo, 40)), tmp_path / "split")
    resume(tmp_path / "split", ["train.steps=80"])
    assert untimed_metrics(tmp_path / "straight") == untimed_metrics(tmp_path / "split")


@pytest.mark.parametrize("algo", [a for a in OTHERS if a != "random"] + ["random"])
def test_the_others_refuse_it_by_name(algo):
    with pytest.raises(ConfigError, match=r"algo\.critic_model\.type: .* does not take an attention"):
        tiny_cfg(f"algo.name={algo}", "algo.critic_model.type=attention")


@pytest.mark.parametrize("overrides,key", [
    (["algo.name=mappo", "algo.model.type=attention"], r"algo\.model\.type"),
    (["algo.name=mappo", "policies.agent.model.type=attention"], r"policies\.agent\.model"),
    (["algo.name=mappo", "algo.critic_model.type=attention", "algo.state=env"], r"algo\.state"),
    (["algo.name=mappo", "algo.critic_model.type=attention", "algo.centralised_critic=false"],
     r"algo\.centralised_critic"),
    (["algo.name=maddpg", "algo.critic_model.type=attention", "algo.critic_model.embed=10",
      "algo.critic_model.heads=4"], r"algo\.critic_model.*multiple of heads"),
    (["algo.name=qmix", "algo.critic_model.type=mlp"], r"algo\.critic_model: type: mlp is no mixer"),
    (["algo.name=mappo", "algo.critic_model.type=attention", "algo.model.recurrent=gru"],
     r"algo\.critic_model\.type: attention with algo\.model\.recurrent: gru"),
    (["env.id=interplay.envs.pixels", "env.kwargs.size=36", "algo.name=mappo",
      "algo.critic_model.type=attention"], r"algo\.critic_model\.type: attention reads .* flat"),
])
def test_impossible_attention_settings_are_refused_by_name(overrides, key, tmp_path):
    with pytest.raises(ConfigError, match=key):
        train(tiny_cfg("env.id=spread", *overrides, "train.steps=8"), tmp_path)


def test_the_cli_refuses_it_with_exit_code_2_and_no_traceback(tmp_path, capsys):
    sets = ["algo.name=ippo", "algo.critic_model.type=attention", "train.steps=8"]
    argv = [word for s in sets for word in ("-s", s)]
    assert main(["train", *argv, "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "algo.critic_model.type: ippo does not take an attention critic" in err
    assert "Traceback" not in err


def test_a_policys_own_algorithm_settings_are_checked_too():
    with pytest.raises(ConfigError, match=r"policies\.agent\.algo\.critic_model\.type: isac"):
        tiny_cfg("env.id=spread", "algo.name=masac", "policies.agent.algo.name=isac",
                 "policies.agent.algo.critic_model.type=attention")


def test_the_preset_trains(tmp_path):
    preset = Path(__file__).resolve().parent.parent / "configs" / "mappo_attention_spread.yaml"
    cfg = tiny_cfg("env.num_envs=4", "algo.rollout=8", "train.steps=128", "log.every=32",
                   files=(preset,))
    assert cfg.algo.critic_model.type == "attention"
    assert any("value_loss/agent" in r for r in train(cfg, tmp_path).rows)

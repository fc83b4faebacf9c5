"""Dict and Tuple action spaces: rows with fixed columns per leaf, masks per discrete leaf, the
on-policy learners' product of distributions, and every place actions go (eval, render,
load_policy, resume, scripted and random policies), on the toy env ``interplay.envs.aim``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces
from helpers import QUIET, read_metrics, straight_and_resumed, tiny_cfg, untimed_metrics

from interplay import ConfigError, evaluate, load_policy, train
from interplay.algos import REGISTRY
from interplay.cli import main
from interplay.envs.aim import Aim
from interplay.envs.spaces import ObservationError, SpaceError, action_view
from interplay.experiment.export import ExportError, exported_module
from interplay.nets.distributions import ActionDist

AIM = ["env.id=interplay.envs.aim", "env.num_envs=4"]
LEARN = ["algo.rollout=32", "algo.epochs=4", "algo.minibatches=2", "algo.lr=0.003",
         "algo.log_std_init=-0.5", "algo.gamma=0.5", "algo.model.hidden=[32]"]
"""Settings under which IPPO and MAPPO learn aim within a thousand or two env steps."""


def _test_return(run_dir: Path) -> float:
    return [r for r in read_metrics(run_dir) if r["phase"] == "test"][-1]["episode_return_mean"]


def _run(tmp_path: Path, name: str, *overrides: str, steps: int = 1024) -> Path:
    train(tiny_cfg(*AIM, *overrides, f"train.steps={steps}", f"train.test_frequency={steps}",
                   "train.test_episodes=20", "train.seed=1", f"log.every={steps}"),
          tmp_path / name)
    return tmp_path / name


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """IPPO trained briefly on aim (Dict actions, a Dict mask per leaf)."""
    return _run(tmp_path_factory.mktemp("dict_actions"), "ippo", "algo.name=ippo", *LEARN)


# -- the view: rows, the env's structure, masks ------------------------------------------------
NESTED = spaces.Dict({
    "steer": spaces.Tuple((spaces.Discrete(3, start=-1), spaces.Box(0.0, 4.0, (2,), np.float32))),
    "buttons": spaces.MultiDiscrete([2, 3], start=[1, 0]),
})


def test_a_nested_space_goes_to_the_env_in_its_own_structure():
    view = action_view(NESTED, "pilot")
    assert view.kind == "composite" and view.dtype is np.float32
    assert view.shape == (5,) and view.mask_dim == 3 + 5  # Discrete(3), then nvec [2, 3]
    # leaves in the space's order: buttons (2 columns), steer.0 (1), steer.1 (2)
    rows = np.array([[1, 2, 0, -1.0, 1.0], [0, 0, 2, 0.0, 5.0]], np.float32)
    actions = view.to_env(view.to_env_batch(rows, squashed=True))
    first, second = actions
    assert NESTED.contains(first) and NESTED.contains(second)
    assert first["buttons"].tolist() == [2, 2] and int(first["steer"][0]) == -1
    assert first["steer"][1].tolist() == [0.0, 4.0]  # [-1, 1] mapped onto the bounds
    assert int(second["steer"][0]) == 1 and second["steer"][1].tolist() == [2.0, 4.0]
    clipped = view.to_env(view.to_env_batch(rows, squashed=False))
    assert clipped[1]["steer"][1].tolist() == [0.0, 4.0]


@pytest.mark.parametrize("mask", [
    [1, 0, 1, 1, 1, 0, 1, 1],  # one flat vector over the discrete leaves
    {"steer": ([1, 0, 1], None), "buttons": [1, 1, 0, 1, 1]},
    {"steer": {0: [1, 0, 1]}, "buttons": np.array([1, 1, 0, 1, 1], np.int8)},
])
def test_a_mask_is_flat_or_keyed_like_the_action_space(mask):
    view = action_view(NESTED, "pilot")
    legal = view.legal(mask)
    if isinstance(mask, list):
        assert legal.tolist() == [bool(x) for x in mask]
    else:
        assert legal.tolist() == [True, True, False, True, True, True, False, True]


def test_a_leaf_left_out_of_a_keyed_mask_is_all_legal():
    assert action_view(NESTED, "pilot").legal({"buttons": [0, 1, 1, 1, 1]}).tolist() == [
        False, True, True, True, True, True, True, True]


@pytest.mark.parametrize(("mask", "named"), [
    ({"buttons": [1, 1]}, "key 'buttons' has 2 entries"),
    ({"steer": (None, [1, 1])}, "key 'steer.1'.*takes no mask"),
    ({"wheels": [1]}, r"keys not in the action space .*\['wheels'\]"),
    ([1, 0, 1], "action_mask has 3 entries .* need 8"),
    ({"steer": "abc"}, "key 'steer' is a str"),
])
def test_a_malformed_mask_names_its_key(mask, named):
    with pytest.raises(ValueError, match=named):
        action_view(NESTED, "pilot").legal(mask)


def test_the_short_env_id_names_the_toy_env():
    from interplay.envs import aim
    from interplay.envs.toy import aim as home

    assert aim.parallel_env is home.parallel_env


def test_a_leaf_interplay_cannot_drive_is_named():
    space = spaces.Dict({"ok": spaces.Discrete(2), "text": spaces.Text(5)})
    with pytest.raises(SpaceError, match="agent 'pilot'.*leaf 'text'"):
        action_view(space, "pilot")


def test_the_distribution_is_a_product_over_the_leaves():
    view = action_view(spaces.Tuple((spaces.Discrete(3), spaces.Box(-1, 1, (2,)),
                                     spaces.MultiDiscrete([2, 2]))), "a")
    dist = ActionDist(view)
    assert dist.net_out == 3 + 4 + 2  # the logits, then the Gaussian's mean
    out = dist.head(-0.5)(torch.randn(6, dist.net_out))  # the log-std appended
    assert out.shape == (6, 11)
    mask = torch.ones(6, view.mask_dim, dtype=torch.bool)
    mask[:, 0] = False  # the Discrete leaf's first choice
    rng = np.random.default_rng(0)
    action, act_logp = dist.act(out, mask.numpy(), rng, explore=True)
    action = torch.from_numpy(action)
    assert action.shape == (6, 5) and (action[:, 0] != 0).all()
    logp, entropy = dist.log_prob_entropy(out, mask, action)
    assert np.allclose(act_logp, logp.detach().numpy(), atol=1e-5)
    logits = out[:, :7].masked_fill(~mask, -1e9).split([3, 2, 2], dim=1)
    cols = [0, 3, 4]
    want = sum(torch.log_softmax(part, 1).gather(1, action[:, [c]].long()).squeeze(1)
               for part, c in zip(logits, cols, strict=True))
    mean, log_std = out[:, 7:9], out[:, 9:11]
    normal = torch.distributions.Normal(mean, log_std.exp())
    want = want + normal.log_prob(action[:, 1:3]).sum(1)
    assert torch.allclose(logp, want, atol=1e-5)
    masked = torch.distributions.Categorical(logits=logits[0]).entropy()
    rest = sum(torch.distributions.Categorical(logits=part).entropy() for part in logits[1:])
    assert torch.allclose(entropy, masked + rest + normal.entropy().sum(1), atol=1e-5)


# -- learning, and every place actions go --------------------------------------------------------
def test_ippo_learns_dict_actions_well_above_random(tmp_path, trained):
    random = _run(tmp_path, "random", "algo.name=random", steps=256)
    learned, chance = _test_return(trained), _test_return(random)
    assert learned > chance + 6.0, (learned, chance)  # at most 16; chance is about 1.8


def test_mappo_learns_dict_actions_too(tmp_path):
    assert _test_return(_run(tmp_path, "mappo", "algo.name=mappo", *LEARN)) > 8.0


def test_load_policy_acts_in_the_envs_structure(trained):
    policy = load_policy(trained)
    env = Aim()
    obs, _ = env.reset(seed=3)
    action = policy.act(obs["archer_0"])
    assert isinstance(action, dict) and env.action_space("archer_0").contains(action)
    assert isinstance(action["move"], np.integer) and action["force"].dtype == np.float32
    batch = policy.act([obs["archer_0"], obs["archer_1"]])
    assert len(batch) == 2 and all(env.action_space("archer_0").contains(a) for a in batch)


def test_masked_moves_are_never_chosen(trained):
    policy = load_policy(trained)
    env = Aim()
    obs, _ = env.reset(seed=0)
    rows = []
    for legal in range(4):
        one = {"observation": obs["archer_0"]["observation"],
               "action_mask": {"move": np.eye(4, dtype=np.int8)[legal]}}
        rows += [(legal, one)] * 50
    actions = policy.act([o for _, o in rows], explore=True)
    assert [int(a["move"]) for a in actions] == [legal for legal, _ in rows]
    # a mask given beside the observation, flat, replaces the observation's own
    assert {int(policy.act(obs["archer_0"], mask=[0, 0, 1, 0], explore=True)["move"])
            for _ in range(20)} == {2}


def test_a_run_plays_no_masked_move(tmp_path):
    import interplay.envs.toy.aim as aim

    made: list[Aim] = []

    def counted(**kwargs):
        made.append(aim.Aim(**kwargs))
        return made[-1]

    from interplay import register_env

    register_env("aim_counted", counted)
    train(tiny_cfg("env.id=aim_counted", "env.num_envs=2", "algo.name=ippo", *LEARN,
                   "train.steps=256", "log.every=256"), tmp_path)
    assert made and sum(env.illegal_moves for env in made) == 0


COMPOSITE_ALGOS = sorted(n for n, c in REGISTRY.items() if "composite" in c.action_kinds)
SMALL = ["env.id=interplay.envs.aim", "env.num_envs=2", *QUIET, "log.every=48",
         "train.test_frequency=80", "train.test_episodes=2"]


@pytest.mark.parametrize("algo", COMPOSITE_ALGOS)
def test_resume_continues_exactly(tmp_path, algo):
    # updates every 32 env steps; the split at 80 falls inside a rollout
    learn = [*LEARN, "algo.rollout=16"] if algo != "random" else []
    straight, split = straight_and_resumed([*SMALL, f"algo.name={algo}", *learn], 160, tmp_path)
    assert straight == split and any(r["phase"] == "test" for r in straight)


@pytest.mark.slow  # starting the worker processes takes seconds
def test_workers_in_subprocesses_act_as_copies_in_process(tmp_path):
    rows = []
    for how in ("sync", "async"):
        train(tiny_cfg(*SMALL, f"env.vectorization={how}", "algo.name=ippo", *LEARN,
                       "algo.rollout=16", "train.steps=96"), tmp_path / how)
        rows.append(untimed_metrics(tmp_path / how))
    assert rows[0] == rows[1]


def test_eval_and_render(trained, tmp_path):
    gif = tmp_path / "aim.gif"
    report = evaluate(trained, episodes=3, render=gif, out=tmp_path / "eval.json")
    assert report["episode_return_mean"] > 6.0 and "render_error" not in report
    assert gif.stat().st_size > 0
    code = main(["eval", str(trained), "--episodes", "2", "--out", str(tmp_path / "cli.json"),
                 "-s", "env.kwargs.render_mode=ansi"])
    assert code == 0


def test_export_refuses_a_composite_space_by_name(trained):
    with pytest.raises(ExportError, match="Dict or Tuple.*load_policy"):
        exported_module(trained)


@pytest.mark.parametrize("algo", sorted(n for n, c in REGISTRY.items()
                                        if "composite" not in c.action_kinds))
def test_algorithms_without_composite_actions_refuse_them_by_name(algo, tmp_path):
    with pytest.raises(ConfigError) as err:
        train(tiny_cfg(*AIM, f"algo.name={algo}", "train.steps=64"), tmp_path)
    text = str(err.value)
    assert f"{algo} cannot train policy 'archer'" in text and "'archer_0'" in text
    assert "Dict(" in text and "composite" in text and "ippo" in text and "mappo" in text


@pytest.mark.parametrize("mask_form", ["flat", "dict"])
def test_tuple_actions_train_and_act(tmp_path, mask_form):
    run = _run(tmp_path, "tuple", "algo.name=ippo", *LEARN, "env.kwargs.action_form=tuple",
               f"env.kwargs.mask_form={mask_form}", steps=512)
    env = Aim(action_form="tuple", mask_form=mask_form)
    obs, _ = env.reset(seed=0)
    action = load_policy(run).act(obs["archer_1"])
    assert isinstance(action, tuple) and env.action_space("archer_1").contains(action)
    assert int(action[0]) != int(env.banned[1])


def bad_mask_at_step_2(**kwargs) -> Aim:
    """Aim whose second agent's mask loses an entry at the episode's second step."""

    class BadMask(Aim):
        def _observe(self):
            out = super()._observe()
            if getattr(self, "t", 0) == 2 and "archer_1" in out:
                out["archer_1"]["action_mask"] = {"move": np.ones(3, np.int8)}
            return out

    return BadMask(**kwargs)


def test_a_malformed_mask_is_named_with_agent_key_and_step(tmp_path):
    with pytest.raises(ObservationError, match=r"at step 2 of its episode: agent 'archer_1': "
                                               r"action_mask key 'move' has 3 entries"):
        train(tiny_cfg("env.id=test_dict_actions:bad_mask_at_step_2", "env.num_envs=1",
                       "train.steps=64"), tmp_path)


def test_scripted_and_random_policies_act_in_dict_spaces(tmp_path):
    run = _run(tmp_path, "scripted", "algo.name=random", "policies.archer.type=scripted",
               "policies.archer.fn=test_dict_actions:aim_perfectly", steps=64)
    assert _test_return(run) == pytest.approx(16.0)


def aim_perfectly(obs, agent):
    """The best action for aim: the target move and force, read off the observation."""
    seen = obs["observation"]
    return {"move": int(np.argmax(seen[:-1])), "force": np.array([seen[-1]], np.float32)}


@pytest.mark.parametrize(("action_form", "mask_form"), [("dict", "dict"), ("tuple", "flat")])
def test_interplay_check_passes_the_toy_env(action_form, mask_form):
    from interplay.envs.check import check_env

    cfg = tiny_cfg("env.id=interplay.envs.aim", f"env.kwargs.action_form={action_form}",
                   f"env.kwargs.mask_form={mask_form}")
    assert check_env(cfg, cycles=20, say=lambda _: None) == []

"""Networks that fit the observation: the ``model`` settings, CNNs for images, image
preprocessing, and networks of the user's own."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from helpers import read_metrics
from torch import nn

from interplay import ConfigError, config
from interplay.cli import main
from interplay.envs.images import ImagePrep, image_layout
from interplay.experiment.build import make_algorithm, make_specs, make_vec_env
from interplay.experiment.evaluate import evaluate
from interplay.experiment.loop import resume, train
from interplay.experiment.run_store.statecodec import decode
from interplay.experiment.run_store.trust import untrusted_code
from interplay.nets.build import Encoder, ImageBlock, Mirrored, Scaled, SpatialHead, UserBlock

QUIET = {"console": False, "tensorboard": False, "curve": False}
PIXELS = {"id": "interplay.envs.pixels", "num_envs": 2, "kwargs": {"size": 36}}
TIMING = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}


def build(env: dict, algo: dict, policies: dict | None = None):
    cfg = config.validate({"env": env, "algo": algo, "policies": policies or {},
                           "train": {"seed": 0, "device": "cpu"}, "log": QUIET})
    vec, _ = make_vec_env(cfg)
    specs = make_specs(cfg, vec)
    return make_algorithm(cfg, specs, "cpu"), specs


def blocks(module: nn.Module) -> list[type]:
    return [type(m) for m in module.modules() if isinstance(m, ImageBlock | UserBlock | Scaled)]


# -- the default network fits the observation --------------------------------------------------
@pytest.mark.parametrize("name", ["ippo", "mappo"])
def test_images_get_a_cnn_by_default_and_vectors_an_mlp(name):
    algo, _ = build(PIXELS, {"name": name})
    p = algo.policies["eye"]
    assert blocks(p.actor) == [ImageBlock] and p.obs_norm is None
    critic = p.critic.nets[0][0]
    assert isinstance(critic, Encoder) and blocks(critic) == [ImageBlock]  # one CNN, shared
    # MAPPO's critic sees its own frame and both agents' frames, each through that CNN.
    features = critic.blocks[0].out_features
    assert critic.out_features == features * (3 if name == "mappo" else 1)
    algo, _ = build({"id": "spread"}, {"name": name})
    actor = algo.policies["agent"].actor.nets[0][0]
    assert blocks(actor) == [] and isinstance(actor[0], nn.Linear)


@pytest.mark.parametrize("name", ["dqn", "maddpg", "matd3"])
def test_q_networks_actors_and_critics_use_the_same_blocks(name):
    algo, _ = build(PIXELS, {"name": name})
    p = algo.policies["eye"]
    if name == "dqn":
        assert blocks(p.online) == [ImageBlock]
    else:
        assert blocks(p.actor) == [ImageBlock]
        assert all(blocks(c) == [ImageBlock] for c in p.critics)
    algo, _ = build(PIXELS, {"name": name, "model": {"type": "mlp"}})
    p = algo.policies["eye"]
    assert blocks(p.online if name == "dqn" else p.actor) == [Scaled]  # bytes scaled, flat


def test_a_cnn_on_vectors_or_on_images_it_does_not_fit_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"algo.model.type: cnn takes image observations.*agent"):
        build({"id": "spread"}, {"name": "ippo", "model": {"type": "cnn"}})
    with pytest.raises(ConfigError, match=r"algo.model: the conv layers .* 12x12 images"):
        build({**PIXELS, "kwargs": {"size": 12}}, {"name": "dqn", "model": {"type": "cnn"}})
    with pytest.warns(UserWarning, match="flattened into an MLP"):
        algo, _ = build({**PIXELS, "kwargs": {"size": 12}}, {"name": "dqn"})
    assert blocks(algo.policies["eye"].online) == [Scaled]
    algo, _ = build({**PIXELS, "kwargs": {"size": 12}},
                    {"name": "dqn", "model": {"kernels": [3, 3], "strides": [1, 1],
                                              "channels": [4, 4]}})
    assert blocks(algo.policies["eye"].online) == [ImageBlock]


BOARD_CNN = {"type": "cnn", "channels": [8, 8], "kernels": [3, 3], "strides": [1, 1],
             "hidden": [32]}


def test_a_board_beside_an_action_mask_takes_a_cnn_when_asked_and_an_mlp_by_default(tmp_path):
    c4 = {"id": "pettingzoo.classic.connect_four_v3", "num_envs": 2}
    algo, _ = build(c4, {"name": "dqn"})
    pid = next(iter(algo.policies))
    assert blocks(algo.policies[pid].online) == []  # auto: a flat MLP, no warning
    algo, specs = build(c4, {"name": "dqn", "model": BOARD_CNN})
    net = algo.policies[pid].online
    assert blocks(net) == [ImageBlock]
    assert specs[pid].obs_view.shape == (6, 7, 2)
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    assert convs[0].in_channels == 2  # the planes are the channels (HWC board)
    run = tmp_path / "run"
    train(config.load([], ["env.id=pettingzoo.classic.connect_four_v3", "env.num_envs=2",
                           "algo.name=dqn", "algo.learning_starts=64", "algo.batch_size=16",
                           "algo.model={type: cnn, channels: [8, 8], kernels: [3, 3], "
                           "strides: [1, 1], hidden: [32]}", "train.self_play=true",
                           "train.steps=300", "log.console=false",
                           "log.tensorboard=false", "log.curve=false"]), run)
    report = evaluate(run, episodes=4, vs="random")
    assert report["win_rate"] + report["draw_rate"] + report["loss_rate"] == pytest.approx(1.0)


def test_padded_conv_layers_keep_a_small_board_whole_and_bad_paddings_are_refused():
    c4 = {"id": "pettingzoo.classic.connect_four_v3", "num_envs": 2}
    padded = {**BOARD_CNN, "channels": [4, 4, 4], "kernels": [3, 3, 3], "strides": [1, 1, 1],
              "paddings": [1, 1, 1], "layout": "hwc"}
    algo, _ = build(c4, {"name": "ippo", "model": padded})
    pid = next(iter(algo.policies))
    block = algo.policies[pid].actor.nets[0][0][0].blocks[0]
    assert [m.padding for m in block.convs if isinstance(m, nn.Conv2d)] == [(1, 1)] * 3
    # Three 3x3 layers on a 6x7 board: 6x7 kept with padding, nothing left without it.
    assert block.out_features == 4 * 6 * 7
    with pytest.raises(ConfigError, match="do not fit"):
        build(c4, {"name": "ippo", "model": {**padded, "paddings": [0, 0, 0]}})
    for bad, says in (([1, 1], "one entry per conv layer"), ([1, -1, 1], "0 or more"),
                      ([1, 2**32, 1], "padding or size above")):
        with pytest.raises(ConfigError, match=says):
            config.validate({"env": c4, "algo": {"name": "ippo",
                                                 "model": {**padded, "paddings": bad}}})
    # An image entry's own encoder takes its paddings, or the model's.
    for bad, says in (([-1], "0 or more"), ([2**32], "stride or padding above")):
        with pytest.raises(ConfigError, match=says):
            config.validate({"env": c4, "algo": {"name": "ippo", "model": {
                "encoders": {"observation": {"paddings": bad}}}}})


SPATIAL = {**BOARD_CNN, "channels": [4, 4], "kernels": [3, 3], "strides": [1, 1],
           "paddings": [1, 1], "hidden": [8], "layout": "hwc", "head": "spatial"}


@pytest.mark.parametrize("env_id, h, w, columns", [
    ("pettingzoo.classic.connect_four_v3", 6, 7, True),  # 7 actions: the board's columns
    ("pettingzoo.classic.tictactoe_v3", 3, 3, False),  # 9 actions: its cells
])
def test_a_spatial_head_reads_each_column_or_cell_with_the_same_layers(env_id, h, w, columns):
    algo, _ = build({"id": env_id, "num_envs": 2}, {"name": "ippo", "model": SPATIAL})
    p = next(iter(algo.policies.values()))
    head = p.actor.nets[0][0]
    assert isinstance(head, SpatialHead) and head.columns is columns
    assert not any(isinstance(m, SpatialHead) for m in p.critic.modules())  # one value: dense
    x = torch.rand(5, h * w * 2)
    logits = head(x)
    assert logits.shape == (5, w if columns else h * w)
    # Each output is the same small network over its own column's (cell's) features.
    fmap = head.enc(x).reshape(5, 4, h, w)
    for j in range(logits.shape[1]):
        own = (fmap[:, :, :, j].reshape(5, -1) if columns
               else fmap[:, :, j // w, j % w])
        assert torch.allclose(logits[:, j], head.each(own)[:, 0], atol=1e-6)
    dqn, _ = build({"id": env_id, "num_envs": 2}, {"name": "dqn", "model": SPATIAL})
    assert any(isinstance(m, SpatialHead) for m in next(iter(dqn.policies.values())).online.modules())


def test_a_spatial_head_that_cannot_read_the_actions_off_the_map_is_refused_naming_the_key():
    c4 = {"id": "pettingzoo.classic.connect_four_v3", "num_envs": 2}
    with pytest.raises(ConfigError, match=r"algo\.model\.head: spatial .* 2x3 map, but policy "
                                          r".* needs 7"):
        build(c4, {"name": "ippo", "model": {**SPATIAL, "paddings": [0, 0]}})
    with pytest.raises(ConfigError, match=r"head: spatial with recurrent: gru"):
        build(c4, {"name": "ippo", "model": {**SPATIAL, "recurrent": "gru"}})
    with pytest.raises(ConfigError, match=r"head: spatial reads the conv layers' map"):
        build(c4, {"name": "ippo", "model": {**SPATIAL, "type": "mlp"}})
    with pytest.raises(ConfigError, match="head"):
        config.validate({"env": c4, "algo": {"name": "ippo",
                                             "model": {**SPATIAL, "head": "sideways"}}})


def test_an_image_in_another_integer_dtype_is_stored_as_its_bytes():
    _, specs = build(PIXELS, {"name": "ippo"})
    view = specs["eye"].obs_view
    frame = np.arange(view.dim).reshape(view.shape) % 256  # int64, not uint8
    rows = np.zeros((2, *view.shape), view.dtype)
    view.write(frame, rows, 1)
    assert rows.dtype == np.uint8 and (rows[1] == frame).all()


def test_the_network_is_handed_bytes_and_scales_them_on_the_device():
    algo, specs = build(PIXELS, {"name": "ippo"})
    actor = algo.policies["eye"].actor.nets[0][0]
    frames = np.random.default_rng(0).integers(0, 256, (5, specs["eye"].obs_dim), np.uint8)
    as_bytes = actor(torch.from_numpy(frames))
    block = actor[0].blocks[0]
    by_hand = block.convs(torch.from_numpy(frames).float().reshape(5, 36, 36, 3)
                          .permute(0, 3, 1, 2) / 255)
    torch.testing.assert_close(actor[0](torch.from_numpy(frames)), by_hand)
    assert as_bytes.dtype == torch.float32


def test_frames_stay_uint8_in_the_rollout_and_a_run_learns_from_them(tmp_path):
    cfg = config.validate({"env": {**PIXELS, "kwargs": {"size": 36, "max_cycles": 5}},
                           "algo": {"name": "ippo", "rollout": 8, "epochs": 1},
                           "policies": {"eye": {"stack_size": 2}},
                           "train": {"steps": 24, "device": "cpu"},
                           "log": {**QUIET, "every": 12},
                           "checkpoint": {"at_end": True}})
    result = train(cfg, tmp_path)
    state = torch.load(result.checkpoint / "state.pt", weights_only=True)
    parts = decode(state["storage"])["parts"]["eye"]
    assert parts and all(p["obs"].dtype == np.uint8 == p["next_obs"].dtype for p in parts)
    assert state["algo"]["policies"]["eye"]["obs_norm"] is None
    conv = state["algo"]["policies"]["eye"]["actor"]["nets.0.0.0.blocks.0.convs.0.weight"]
    assert conv.shape[1] == 6  # two stacked RGB frames, along the channels


# -- preprocessing: grayscale and resize, before frame stacking ---------------------------------
def test_grayscale_and_resize_give_the_shapes_and_values_asked_for():
    box = spaces.Box(0, 255, (8, 6, 3), np.uint8)
    prep = ImagePrep(box, "hwc", [4, 3], True, "algo.model")
    frame = np.zeros((8, 6, 3), np.uint8)
    frame[:, :, 0] = 200  # pure red: luminance 0.299 * 200
    frame[:2, :2] = 0  # one output pixel of the 2x2 area is black
    out = prep(np.stack([frame.reshape(-1)] * 3).reshape(1, 3, -1))
    assert out.shape == (1, 3, 4 * 3 * 1) and out.dtype == np.uint8
    img = out[0, 0].reshape(4, 3)
    assert img[0, 0] == 0 and (img.reshape(-1)[1:] == round(0.299 * 200)).all()
    chw = ImagePrep(spaces.Box(0.0, 1.0, (3, 10, 10), np.float32), "chw", [5, 5], False, "k")
    rows = np.random.default_rng(0).random((2, 300), np.float32)
    out = chw(rows).reshape(2, 3, 5, 5)
    np.testing.assert_allclose(out[0, 1, 0, 0], rows[0].reshape(3, 10, 10)[1, :2, :2].mean(),
                               rtol=1e-5)
    assert chw.space.shape == (3, 5, 5) and chw.space.dtype == np.float32


@pytest.mark.parametrize("layout", ["hwc", "chw"])
def test_grayscale_then_resize_is_the_luminance_averaged_over_each_area(layout):
    # tall frames like pistonball's, shrunk by whole factors: each output pixel is the mean
    # luminance of its block, in either channel layout
    rng = np.random.default_rng(1)
    frames = rng.integers(0, 256, (2, 5, 48, 30, 3), dtype=np.uint8)  # [envs, agents, H, W, C]
    luma = frames.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    want = luma.reshape(2, 5, 8, 6, 5, 6).mean(axis=(3, 5))
    shape = (48, 30, 3) if layout == "hwc" else (3, 48, 30)
    rows = frames if layout == "hwc" else frames.transpose(0, 1, 4, 2, 3)
    prep = ImagePrep(spaces.Box(0, 255, shape, np.uint8), layout, [8, 5], True, "algo.model")
    out = prep(np.ascontiguousarray(rows).reshape(2, 5, -1))
    assert out.dtype == np.uint8 and prep.space.shape == ((8, 5, 1) if layout == "hwc" else (1, 8, 5))
    assert np.abs(out.reshape(2, 5, 8, 5).astype(np.float64) - want).max() <= 0.5 + 1e-4


def test_preprocessing_runs_per_policy_between_env_and_stacking():
    algo, specs = build({**PIXELS, "kwargs": {"size": 42}}, {"name": "ippo"},
                        {"eye": {"stack_size": 3, "model": {"resize": [40, 40],
                                                            "grayscale": True}}})
    spec = specs["eye"]
    assert spec.obs_view.shape == (40, 40, 1) and spec.obs_dim == 40 * 40 * 3
    assert algo.policies["eye"].actor.nets[0][0][0].blocks[0].convs[0].in_channels == 3
    from helpers import make_runner

    runner = make_runner({"env": {**PIXELS, "kwargs": {"size": 42}},
                          "policies": {"eye": {"stack_size": 3,
                                               "model": {"resize": [40, 40], "grayscale": True}}},
                          "algo": {"name": "ippo"}})
    runner.reset(0)
    out = runner.step()
    g = runner.groups[0]
    assert g.obs.shape == (2, 2, 40 * 40 * 3) and g.obs.dtype == np.uint8
    assert isinstance(out, dict)


def test_preprocessing_an_observation_that_is_no_image_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match=r"policies.agent.model.resize: .* not images"):
        build({"id": "spread"}, {"name": "ippo"}, {"agent": {"model": {"resize": [4, 4]}}})
    with pytest.raises(ConfigError, match=r"algo.model.grayscale: .* 1 channels"):
        ImagePrep(spaces.Box(0, 255, (36, 36, 1), np.uint8), "hwc", None, True, "algo.model")


def test_an_image_whose_channel_axis_is_ambiguous_asks_for_the_layout():
    with pytest.raises(ConfigError, match=r"algo.model: .* shape \(3, 8, 3\).*model.layout"):
        image_layout((3, 8, 3), "auto", "algo.model")
    assert image_layout((3, 8, 3), "hwc", "algo.model") == "hwc"
    assert image_layout((84, 84, 12), "auto", "k") == "hwc"
    assert image_layout((12, 84, 84), "auto", "k") == "chw"


# -- settings: renamed keys, unknown keys, recurrent capability --------------------------------
@pytest.mark.parametrize(("algo", "old", "new"), [
    ("ippo", "net", "algo.model"), ("dqn", "net", "algo.model"),
    ("mappo", "policy_nets", "policies.<pid>.model"), ("maddpg", "actor_net", "algo.model"),
    ("matd3", "critic_net", "algo.critic_model"),
])
def test_an_old_network_key_names_its_new_one(algo, old, new, capsys):
    with pytest.raises(ConfigError, match=rf"algo\.{old}: this setting is now {new}"):
        config.load([], [f"algo.name={algo}", f"algo.{old}.hidden=[8]"])
    with pytest.raises(ConfigError, match=rf"algo\.{old}: this setting is now"):
        config.validate({"algo": {"name": algo, old: {}}})
    assert main(["config", "-s", f"algo.name={algo}", "-s", f"algo.{old}.hidden=[8]"]) == 2
    assert new in capsys.readouterr().err


def test_model_settings_are_shown_and_unknown_ones_named_with_the_nearest():
    text = config.describe(config.load([], ["algo.name=dqn"]))
    assert "  model:  # The Q-networks" in text
    assert "    hidden: [128, 128]  # Widths of the hidden layers" in text
    assert "(default: [128, 128])" in text
    with pytest.raises(ConfigError, match=r"policies.agent.model.chanels: unknown key; did you "
                                          r"mean policies.agent.model.channels"):
        config.load([], ["algo.name=ippo", "policies.agent.model.chanels=[4]"])
    with pytest.raises(ConfigError, match=r"algo.critic_model.kernel: unknown key; did you mean "
                                          r"algo.critic_model.kernels"):
        config.load([], ["algo.name=matd3", "algo.critic_model.kernel=[4]"])
    with pytest.raises(ConfigError, match=r"policies.agent.model: channels, kernels and strides"):
        config.load([], ["algo.name=ippo", "policies.agent.model.channels=[4]"])


@pytest.mark.parametrize("algo", ["isac", "maddpg", "matd3"])
def test_a_recurrent_model_is_refused_where_the_algorithm_cannot_learn_one(algo):
    with pytest.raises(ConfigError, match=rf"algo.model.recurrent: {algo} does not support "
                                          "recurrent networks yet"):
        config.load([], [f"algo.name={algo}", "algo.model.recurrent=gru"])
    with pytest.raises(ConfigError, match=rf"policies.p.model.recurrent: {algo} does not"):
        config.load([], [f"algo.name={algo}", "policies.p.model.recurrent=lstm"])
    cfg = config.load([], ["algo.name=mappo", "algo.model.recurrent=gru",
                           "algo.model.recurrent_size=32", "algo.model.seq_len=8"])
    assert (cfg.algo.model.recurrent, cfg.algo.model.recurrent_size) == ("gru", 32)


def test_critics_take_observations_as_the_actors_see_them():
    with pytest.raises(ConfigError, match=r"algo.critic_model: resize: critics see"):
        config.load([], ["algo.name=maddpg", "algo.critic_model.resize=[8, 8]"])


# -- a network of the user's own ----------------------------------------------------------------
def user_cfg(steps: int, **model) -> dict:
    return {"env": {**PIXELS, "kwargs": {"size": 8, "max_cycles": 5}},
            "algo": {"name": "ippo", "rollout": 10, "epochs": 2,
                     "model": {"type": "user_nets:PooledColour", "kwargs": {"width": 8},
                               **model}},
            "policies": {"eye": {"stack_size": 2}},
            "train": {"steps": steps, "seed": 3, "device": "cpu", "test_frequency": 40,
                      "test_episodes": 2},
            "log": {**QUIET, "every": 20}}


def test_a_user_module_trains_resumes_exactly_and_evaluates(tmp_path):
    straight = train(config.validate(user_cfg(80)), tmp_path / "straight")
    train(config.validate(user_cfg(40)), tmp_path / "split")
    resumed = resume(tmp_path / "split", ["train.steps=80"])
    assert resumed.env_steps == straight.env_steps == 80

    def numbers(run):
        return [{k: v for k, v in r.items() if k not in TIMING} for r in read_metrics(run)]

    assert numbers(tmp_path / "straight") == numbers(tmp_path / "split")
    a = torch.load(straight.checkpoint / "state.pt", weights_only=True)["algo"]["policies"]
    b = torch.load(resumed.checkpoint / "state.pt", weights_only=True)["algo"]["policies"]
    for key, value in a["eye"]["actor"].items():
        torch.testing.assert_close(value, b["eye"]["actor"][key])
    assert "nets.0.0.0.blocks.0.module.linear.weight" in a["eye"]["actor"]
    report = evaluate(tmp_path / "straight", episodes=2)
    assert report["episodes"] == 2
    assert main(["eval", str(tmp_path / "straight"), "--episodes", "1"]) == 2  # needs --trust
    assert main(["eval", str(tmp_path / "straight"), "--episodes", "1", "--trust"]) == 0


def test_a_user_module_on_vectors_gets_a_flat_batch_and_heads_only():
    algo, specs = build({"id": "spread"}, {"name": "dqn", "model": {"type": "user_nets:FlatFeatures"}})
    online = algo.policies["agent"].online
    assert blocks(online) == [UserBlock] and isinstance(online.trunk[1], nn.Identity)
    assert online(torch.zeros(3, specs["agent"].obs_dim)).shape == (3, 5)


@pytest.mark.parametrize(("name", "needle"), [
    ("NoSpaces", r"cannot be built as NoSpaces\(observation_space, action_space, "
                 r"\*\*algo.model.kwargs\)"),
    ("NotAModule", "is not a torch.nn.Module subclass"),
    ("OneFeatureVector", r"maps a batch of shape \[2, 36, 36, 3\] to a tensor of shape \[4\]"),
    ("WrongWidth", "says out_features = 99 but returns 8"),
    ("Missing", "module 'user_nets' has no callable 'Missing'"),
])
def test_a_user_module_that_does_not_fit_is_named(name, needle):
    with pytest.raises(ConfigError, match=rf"algo.model.type: .*{needle}") as err:
        build(PIXELS, {"name": "ippo", "model": {"type": f"user_nets:{name}"}})
    assert name in str(err.value)


def test_a_user_module_is_code_a_run_folder_needs_trust_for():
    data = {"algo": {"name": "ippo", "model": {"type": "my_nets:Net"}},
            "policies": {"p": {"model": {"type": "their_nets:Net"}}}}
    assert untrusted_code(data) == {"my_nets": ["algo.model.type 'my_nets:Net'"],
                                    "their_nets": ["policies.p.model.type 'their_nets:Net'"]}


def test_tanh_through_numpy_gives_torchs_values_and_gradients_and_steps_aside_where_it_must():
    from interplay.nets.mlp import NUMPY_TANH_FROM, Tanh
    act = Tanh()
    x = (torch.randn(300, 17) * 3).requires_grad_()
    assert x.numel() >= NUMPY_TANH_FROM  # NumPy's turn
    ref = x.detach().clone().requires_grad_()
    y, want = act(x), torch.tanh(ref)
    assert y.dtype == torch.float32 and y.shape == x.shape
    assert torch.allclose(y, want, rtol=0, atol=2e-7)
    weights = torch.randn(300, 17)
    (y * weights).sum().backward()
    (want * weights).sum().backward()
    assert torch.allclose(x.grad, ref.grad, rtol=1e-5, atol=1e-6)
    strided = torch.randn(600, 34)[:, ::2]
    assert strided.numel() >= NUMPY_TANH_FROM
    with torch.no_grad():
        assert torch.allclose(act(strided), torch.tanh(strided), rtol=0, atol=2e-7)
    # Where NumPy cannot compute or would not gain: torch's own, exactly (float64, vmap,
    # tracing, a few numbers).
    few = x.detach()[:2]
    assert torch.equal(act(few), torch.tanh(few))
    wide = x.detach().double()
    assert torch.equal(act(wide), torch.tanh(wide))
    stacked = torch.stack([x.detach(), -x.detach()])
    assert torch.equal(torch.func.vmap(act)(stacked), torch.tanh(stacked))
    traced = torch.jit.trace(nn.Sequential(nn.Linear(17, 3), act), x.detach()[:4])
    assert "aten::tanh" in str(traced.inlined_graph)


def mirror_rows(x: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """Flat rows of ``h x w x 2`` boards, each board reversed left to right."""
    return x.reshape(-1, h, w, 2).flip(2).reshape(x.shape)


@pytest.mark.parametrize("env_id, h, w, columns", [
    ("pettingzoo.classic.connect_four_v3", 6, 7, True),
    ("pettingzoo.classic.tictactoe_v3", 3, 3, False),
])
@pytest.mark.parametrize("head", ["dense", "spatial"])
def test_a_mirrored_network_answers_the_mirror_image_with_its_answer_mirrored(env_id, h, w,
                                                                              columns, head):
    model = {**SPATIAL, "head": head, "mirror": True}
    x = torch.rand(5, h * w * 2)
    swap = (torch.arange(w).flip(0) if columns
            else torch.arange(h * w).reshape(h, w).flip(1).reshape(-1))
    algo, _ = build({"id": env_id, "num_envs": 2}, {"name": "ippo", "model": model})
    p = next(iter(algo.policies.values()))
    actor, critic = p.actor.nets[0][0], p.critic.nets[0]
    assert isinstance(actor, Mirrored) and isinstance(critic, Mirrored)
    logits = actor(x)
    assert torch.allclose(actor(mirror_rows(x, h, w)), logits[:, swap], atol=1e-5)
    assert torch.allclose(critic(mirror_rows(x, h, w)), critic(x), atol=1e-5)
    # Not a symmetric function by chance: the network inside it is not one.
    inner = actor.net(x)
    assert not torch.allclose(actor.net(mirror_rows(x, h, w)), inner[:, swap], atol=1e-3)
    assert torch.allclose(logits, (inner + actor.net(mirror_rows(x, h, w))[:, swap]) / 2,
                          atol=1e-5)
    dqn, _ = build({"id": env_id, "num_envs": 2}, {"name": "dqn", "model": model})
    q = next(iter(dqn.policies.values())).online
    assert torch.allclose(q(mirror_rows(x, h, w)), q(x)[:, swap], atol=1e-5)


def test_a_mirror_the_network_cannot_put_back_is_refused_naming_the_key():
    c4 = {"id": "pettingzoo.classic.connect_four_v3", "num_envs": 2}
    with pytest.raises(ConfigError, match=r"algo\.model\.mirror with recurrent: gru"):
        build(c4, {"name": "ippo", "model": {**BOARD_CNN, "mirror": True, "recurrent": "gru"}})
    with pytest.raises(ConfigError, match=r"algo\.model\.mirror mirrors one image observation"):
        build(c4, {"name": "ippo", "model": {"type": "mlp", "mirror": True, "layout": "hwc"}})
    # a colour to name on a 36x36 image: an action is not a column or a cell
    with pytest.raises(ConfigError, match=r"algo\.model\.mirror .* 36x36 image .* gives \d "
                                          r"outputs for Discrete"):
        build(PIXELS, {"name": "ippo", "model": {"mirror": True}})

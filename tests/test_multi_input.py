"""Dict and Tuple observations with image entries: kept entry by entry (image bytes as bytes),
encoded entry by entry, standardised on their float entries only."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from helpers import CLI_QUIET, read_metrics

from interplay import config, load_policy, train
from interplay.cli import main
from interplay.envs.spaces import obs_view
from interplay.envs.toy.color_key import ColorKey
from interplay.experiment.build import make_algorithm, make_specs, make_vec_env
from interplay.experiment.loop import resume
from interplay.experiment.run_store.statecodec import decode
from interplay.nets.leaves import LeafEncoder
from interplay.nets.normalize import LeafNorm

QUIET = {"console": False, "tensorboard": False, "curve": False}
SMALL_CNN = {"camera": {"channels": [4], "kernels": [2], "strides": [2]}}
MIXED = spaces.Dict({
    "camera": spaces.Box(0, 255, (4, 5, 3), np.uint8),
    "depth": spaces.Box(0.0, 1.0, (4, 5), np.float32),
    "speed": spaces.Box(-2.0, 2.0, (2,), np.float32),
    "mode": spaces.Discrete(3, start=1),
    "action_mask": spaces.MultiBinary(4),
})


def color_key(algo: dict, steps: int = 100, size: int = 4, **extra) -> config.Config:
    return config.validate({
        "env": {"id": "interplay.envs.color_key", "num_envs": 2,
                "kwargs": {"size": size, "max_cycles": 10}},
        "algo": algo, "train": {"steps": steps, "seed": 0, "device": "cpu"},
        "log": {**QUIET, "every": steps}, **extra})


def test_a_dict_with_images_round_trips_through_its_byte_row():
    view = obs_view(MIXED, "a")
    assert view.dtype == np.uint8 and view.leaves is not None
    # image bytes once, every float value as its four bytes; the mask is kept aside
    assert view.dim == 4 * 5 * 3 + 4 * (4 * 5 + 2 + 3)
    obs = MIXED.sample()
    rows = np.zeros((2, view.dim), view.dtype)
    view.write(obs, rows, 1)
    back = view.unflatten(rows[1])
    assert set(back) == {"camera", "depth", "speed", "mode"}
    for key in back:
        np.testing.assert_array_equal(back[key], obs[key])
    assert back["camera"].dtype == np.uint8
    np.testing.assert_array_equal(rows[1, :60], obs["camera"].reshape(-1))


def test_a_tuple_and_a_float_only_dict_keep_their_entries_too():
    tup = spaces.Tuple((spaces.Box(0, 255, (6, 6), np.uint8), spaces.Discrete(2)))
    view = obs_view(tup, "a")
    rows = np.zeros((1, view.dim), view.dtype)
    obs = (np.arange(36, dtype=np.uint8).reshape(6, 6), 1)
    view.write(obs, rows, 0)
    back = view.unflatten(rows[0])
    np.testing.assert_array_equal(back[0], obs[0])
    assert int(back[1]) == 1 and view.leaves.keys == ["0", "1"]
    # float images need no bytes: the row is exactly the flattened observation
    floats = spaces.Dict({"img": spaces.Box(0.0, 1.0, (3, 4, 4)), "v": spaces.Box(-1, 1, (2,))})
    view = obs_view(floats, "a")
    obs = floats.sample()
    rows = np.zeros((1, view.dim), view.dtype)
    view.write(obs, rows, 0)
    assert view.dtype == np.float32
    np.testing.assert_array_equal(rows[0], spaces.flatten(floats, obs))


def test_a_bad_entry_is_named_and_a_dict_without_images_is_flattened_as_before():
    view = obs_view(MIXED, "a")
    obs = MIXED.sample()
    obs["speed"] = np.array([np.nan, 0.0], np.float32)
    with pytest.raises(ValueError, match="key 'speed'.*NaN"):
        view.write(obs, np.zeros((1, view.dim), view.dtype), 0)
    plain = obs_view(spaces.Dict({"a": spaces.Box(0, 1, (3,)), "b": spaces.Discrete(2)}), "a")
    assert plain.leaves is None and plain.dim == 5


def test_image_entries_stay_uint8_in_replay_and_rollout_storage(tmp_path):
    model = {"encoders": SMALL_CNN}
    dqn = train(color_key({"name": "dqn", "buffer_size": 500, "learning_starts": 20,
                           "train_every": 4, "batch_size": 8, "model": model}, steps=60), tmp_path / "dqn")
    buffer = decode(torch.load(dqn.checkpoint / "state.pt", weights_only=True))[
        "storage"]["eye"]["arrays"]
    width = 4 * 4 * 3 + 4 * 3  # the frame's bytes, then the key's three floats
    for key in ("obs", "next_obs"):
        assert buffer[key].dtype == np.uint8 and buffer[key].shape == (120, width), key
    assert buffer["obs"][:, :48].max() > 1  # raw bytes, not scaled
    cfg = color_key({"name": "ippo", "rollout": 8, "model": model})
    env, _ = make_vec_env(cfg)
    algo = make_algorithm(cfg, make_specs(cfg, env), "cpu")
    from helpers import make_runner

    runner = make_runner(cfg.model_dump())
    storage = algo.make_storage(2)
    runner.reset(seed=0)
    for _ in range(10):  # whole episodes are handed over: ten steps
        for pid, batch in runner.step().items():
            storage.add(pid, batch)
    stored = storage.rollout("eye")
    assert stored.obs.dtype == np.uint8 and stored.obs.shape[-1] == width


def test_each_entry_gets_its_encoder_and_encoders_name_them_by_key():
    cfg = color_key({"name": "ippo", "model": {"hidden": [16], "encoders": {
        **SMALL_CNN, "key": {"type": "mlp", "hidden": [8, 8]}}}}, size=6)
    env, _ = make_vec_env(cfg)
    actor = make_algorithm(cfg, make_specs(cfg, env), "cpu").policies["eye"].actor
    encoders = [m for m in actor.modules() if isinstance(m, LeafEncoder)]
    assert encoders and encoders[0].describe() == [(("camera",), "cnn"), (("key",), "mlp")]
    convs = [m for m in encoders[0].modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size) for c in convs] == [(3, 4, (2, 2))]
    # model.type mlp: one flattened vector (48 frame values + 3 key values) into the MLP
    cfg = color_key({"name": "ippo", "model": {"type": "mlp", "hidden": [16]}})
    env, _ = make_vec_env(cfg)
    actor = make_algorithm(cfg, make_specs(cfg, env), "cpu").policies["eye"].actor
    first = next(m for m in actor.modules() if isinstance(m, torch.nn.Linear))
    assert first.in_features == 4 * 4 * 3 + 3
    assert not any(isinstance(m, LeafEncoder) for m in actor.modules())


@pytest.mark.parametrize(("setting", "named"), [
    ("algo.model.encoders.camra.type=cnn", ["encoders.camra", "'camera'", "'key'"]),
    ("algo.model.encoders.key.type=cnn", ["encoders.key.type", "cnn takes image entries"]),
    ("algo.model.encoders.camera.kernel=3", ["encoders.camera.kernel"]),
])
def test_bad_encoders_are_refused_before_any_step_naming_the_key(tmp_path, capsys, setting,
                                                                 named):
    code = main(["train", "-s", "env.id=interplay.envs.color_key", "-s", "env.kwargs.size=4",
                 "-s", "algo.name=ippo", "-s", setting, "-s", "train.steps=50", *CLI_QUIET,
                 "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    for text in named:
        assert text in err, (text, err)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_only_the_float_entries_are_standardised():
    view = obs_view(MIXED, "a")
    rows = np.zeros((50, view.dim), view.dtype)
    for i in range(50):
        view.write(MIXED.sample(), rows, i)
    norm = LeafNorm(view.leaves, stack=1)
    norm.update(rows)
    out = norm.normalize(rows, 10.0)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out[:, :60], rows[:, :60])  # the frame's bytes untouched
    floats = view.leaves.read_floats(out, norm.cols)
    assert abs(floats.mean(axis=0)).max() < 1e-3


def test_per_entry_encoders_learn_colour_key_far_above_random(tmp_path, learning_result):
    # The action to pay is (colour + key) % 3: the frame alone or the key alone is chance.
    cfg = color_key({"name": "ippo", "rollout": 25, "epochs": 4, "minibatches": 1, "lr": 2e-2,
                     "ent_coef": 0.0, "model": {"hidden": [32], "encoders": SMALL_CNN}},
                    steps=800)
    cfg = config.validate(config.merge(cfg.model_dump(), {
        "env": {"num_envs": 4}, "train": {"test_frequency": 800, "test_episodes": 20}}))
    result = train(cfg, tmp_path)
    score = [r for r in result.rows if r["phase"] == "test"][-1]["episode_return_mean"]
    random_return = 2 * 10 / 3
    learning_result(env="interplay.envs.color_key", algo="ippo (per-entry)", steps=800,
                    score=score, random=random_return)
    assert score > 1.5 * random_return, score


def test_load_policy_acts_on_dict_observations_with_stacked_frames(tmp_path):
    cfg = color_key({"name": "ippo", "rollout": 10, "model": {"encoders": SMALL_CNN}},
                    steps=40, policies={"eye": {"stack_size": 2}})
    train(cfg, tmp_path)
    policy = load_policy(tmp_path)
    env = ColorKey(size=4, max_cycles=10)
    obs, _ = env.reset(seed=1)
    state = policy.initial_state()
    one = policy.act(obs["eye_0"], state=state)
    assert 0 <= int(one) < 3
    both = policy.act([obs["eye_0"], obs["eye_1"]])
    assert both.shape == (2,)
    with pytest.raises(Exception, match="key 'camera'"):
        policy.act({"camera": np.zeros((3, 3, 3), np.uint8), "key": obs["eye_0"]["key"]})


@pytest.mark.parametrize("algo", [
    {"name": "mappo", "rollout": 15, "epochs": 2},
    {"name": "dqn", "learning_starts": 30, "buffer_size": 200, "train_every": 4, "batch_size": 8},
])
def test_resume_continues_exactly(tmp_path, algo):
    def cfg(steps: int) -> config.Config:
        return config.validate(config.merge(color_key(
            {**algo, "model": {"hidden": [16], "encoders": SMALL_CNN}}, steps=steps,
            policies={"eye": {"stack_size": 2}}).model_dump(),
            {"log": {"every": 30}, "checkpoint": {"every": 60}}))

    straight = train(cfg(120), tmp_path / "straight")
    train(cfg(60), tmp_path / "split")
    resumed = resume(tmp_path / "split", ["train.steps=120"])
    assert resumed.env_steps == straight.env_steps == 120
    timing = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}
    a, b = (
        [{k: v for k, v in r.items() if k not in timing} for r in read_metrics(tmp_path / d)]
        for d in ("straight", "split"))
    assert a == b


def test_grayscale_resize_and_stacking_apply_to_each_image_entry(tmp_path):
    cfg = color_key({"name": "ippo", "rollout": 10, "model": {
        "resize": [4, 4], "grayscale": True, "encoders": SMALL_CNN}}, steps=40, size=8,
        policies={"eye": {"stack_size": 3}})
    result = train(cfg, tmp_path)
    actor = torch.load(result.checkpoint / "state.pt", weights_only=True)["algo"]["policies"][
        "eye"]["actor"]
    conv = next(v for k, v in actor.items() if k.endswith("convs.0.weight"))
    assert conv.shape[1] == 3  # three stacked gray frames
    policy = load_policy(tmp_path)
    assert policy.spec.obs_view.dim == 4 * 4 + 4 * 3  # a 4x4 gray frame, then the key's floats
    obs, _ = ColorKey(size=8).reset(seed=0)
    assert 0 <= int(policy.act(obs["eye_0"])) < 3


def test_encoders_for_observations_without_image_entries_are_refused(tmp_path, capsys):
    code = main(["train", "-s", "env.id=spread", "-s", "algo.name=ippo", "-s",
                 "algo.model.encoders.pos.type=mlp", "-s", "train.steps=50", *CLI_QUIET,
                 "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "algo.model.encoders.pos" in err and "no image entries" in err


def test_type_mlp_trains_on_the_flattened_observation_with_the_encoders_unused(tmp_path):
    cfg = color_key({"name": "dqn", "learning_starts": 20, "train_every": 4, "batch_size": 8,
                     "model": {"type": "mlp", "hidden": [16], "encoders": SMALL_CNN}}, steps=40)
    with pytest.warns(UserWarning, match="encoders are not used"):
        result = train(cfg, tmp_path)
    assert result.env_steps == 40

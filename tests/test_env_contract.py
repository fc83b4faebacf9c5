"""Observations that do not fit their space are named: agent, copy, step, space and what came."""

from __future__ import annotations

import pytest

from interplay.config.loading import load
from interplay.envs.spaces import ObservationError
from interplay.experiment.loop import train
from interplay.experiment.run_store.checkpoint import latest_valid

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


def _train(tmp_path, *overrides):
    return train(load([], [*QUIET, "train.steps=200", *overrides]), tmp_path / "run")


@pytest.mark.parametrize(("bad", "got"), [
    ("short", "got an array of shape (1,) and dtype float32"),
    ("long", "got an array of shape (5,) and dtype float32"),
    ("nested", "got an array of shape (1, 2) and dtype float32"),
    ("scalar", "got an array of shape () and dtype float32"),
    ("text", "got an array of shape (2,) and dtype <U1"),
    ("none", "got a NoneType"),
    ("list3", "got a list of shape (3,)"),
    ("dict", "got a dict"),
])
def test_a_parallel_env_observation_of_the_wrong_shape_or_dtype_is_named(tmp_path, bad, got):
    with pytest.raises(ObservationError) as info:
        _train(tmp_path, "env.id=broken_envs:wrong_obs", f"env.kwargs={{bad: {bad}, at: 3}}",
               "env.num_envs=2")
    text = str(info.value)
    assert "env copy 0, at step 3 of its episode: agent 'a_1': observation space Box(" in text
    assert "(2,), float32)" in text and got in text


@pytest.mark.parametrize(("bad", "got"), [
    ("objects", "got an array of shape (2,) and dtype object (its dtype object is not a number type)"),
    ("nan_text", "got an array of shape (2,) and dtype <U3 (its dtype <U3 is not a number type)"),
    ("complex", "dtype complex64 (its dtype complex64 is not a number type)"),
    ("none_list", "got a list of shape (2,) (as an array, dtype object) (its dtype object is not"),
])
def test_an_observation_of_a_dtype_a_cast_would_change_is_named(tmp_path, bad, got):
    # strings and None would become NaN, complex numbers would lose their imaginary part
    with pytest.raises(ObservationError) as info:
        _train(tmp_path, "env.id=broken_envs:wrong_obs", f"env.kwargs={{bad: {bad}, at: 3}}")
    assert "at step 3 of its episode: agent 'a_1': observation space Box(" in str(info.value)
    assert got in str(info.value)


@pytest.mark.parametrize(("space", "bad", "got"), [
    ("dict", "no_flag", "got a dict with keys ['pos'] (keys missing: ['flag'])"),
    ("dict", "extra_key", "(keys not in the space: ['speed'])"),
    ("dict", "short_pos", "(key 'pos': its shape is not (2,))"),
    ("image", "float_frame", "dtype float64 (values 300.5..300.5 do not fit its dtype uint8"),
    ("image", "negative_frame", "dtype int64 (values -5..-5 do not fit its dtype uint8"),
    ("discrete", "fraction", "got a float of shape () (as an array, dtype float64) (1.5 is not one"),
])
def test_dict_image_and_discrete_observations_that_do_not_fit_are_named(tmp_path, space, bad, got):
    with pytest.raises(ObservationError) as info:
        _train(tmp_path, "env.id=broken_envs:wrong_typed_obs",
               f"env.kwargs={{space: {space}, bad: {bad}, at: 3}}")
    assert "at step 3 of its episode: agent 'a_1': observation space " in str(info.value)
    assert got in str(info.value)


def test_a_bad_observation_in_an_async_worker_is_named(tmp_path):
    with pytest.raises(ObservationError) as info:
        _train(tmp_path, "env.id=broken_envs:wrong_obs", "env.kwargs={at: 3}",
               "env.num_envs=2", "env.vectorization=async", "env.num_workers=1")
    assert "env copy 0, at step 3 of its episode: agent 'a_1'" in str(info.value)
    assert "got an array of shape (1,) and dtype float32" in str(info.value)


def test_a_bad_observation_at_reset_and_at_the_end_of_an_episode_is_named(tmp_path):
    with pytest.raises(ObservationError, match=r"env copy 0, at reset: agent 'a_1'.*shape \(1,\)"):
        _train(tmp_path / "at_reset", "env.id=broken_envs:wrong_obs", "env.kwargs={at: 0}")
    with pytest.raises(ObservationError, match=r"at step 5 of its episode: agent 'a_1'.*\(5,\)"):
        _train(tmp_path / "at_end", "env.id=broken_envs:wrong_obs",
               "env.kwargs={at: 5, max_steps: 5, bad: long}")


@pytest.mark.parametrize(("kwargs", "needles"), [
    ("{at: 4}", ["at step 4 of its episode: agent 'player_", "Box(", "(3,), float32)",
                 "got an array of shape (2,) and dtype float32"]),
    ("{at: 2, image: true}", ["at step 2 of its episode: agent 'player_", "(2, 3), float32)",
                              "got an array of shape (3, 2) and dtype float32"]),
    ("{at: 3, masked: true, bad: nomask}", ["at step 3 of its episode: agent 'player_",
                                            "observation space Dict(", "got a dict",
                                            "it holds no action_mask"]),
    ("{at: 3, masked: true, bad: array}", ["at step 3 of its episode: agent 'player_",
                                           "observation space Dict(",
                                           "got an array of shape (3,) and dtype float32"]),
])
def test_an_aec_env_observation_of_the_wrong_shape_is_named(tmp_path, kwargs, needles):
    with pytest.raises(ObservationError) as info:
        _train(tmp_path, "env.id=broken_envs:wrong_aec_obs", f"env.kwargs={kwargs}")
    for needle in needles:
        assert needle in str(info.value)


def test_checkpoints_written_before_a_bad_observation_stay(tmp_path):
    with pytest.raises(ObservationError, match="agent 'a_1'"):
        _train(tmp_path, "env.id=broken_envs:wrong_obs", "env.kwargs={at: 2, episode: 5}",
               "checkpoint.every=20")
    assert latest_valid(tmp_path / "run") is not None
    assert (tmp_path / "run" / "metrics.jsonl").exists()


def test_the_cli_prints_the_named_error_without_a_traceback(tmp_path, capsys):
    from interplay.cli import main

    code = main(["train", "-s", "env.id=broken_envs:wrong_obs", "-s", "train.steps=50",
                 *[a for o in QUIET for a in ("-s", o)], "--run-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "agent 'a_1'" in err and "Traceback" not in err


def test_a_mask_of_the_wrong_length_in_training_is_named(tmp_path):
    with pytest.raises(ObservationError, match=r"env copy 0, at reset: agent 'a_0': action_mask has "
                                               r"2 entries but the action space Discrete\(3\) needs 3"):
        _train(tmp_path, "env.id=broken_envs:info_masked", "env.kwargs={width: 2}")


@pytest.mark.parametrize(("space", "obs"), [
    ("discrete", -1),  # would land on the last value unseen
    ("discrete", 3),
    ("image", "transposed"),  # the same size in another shape
])
def test_observations_that_would_pass_unseen_are_refused(space, obs):
    import numpy as np
    from gymnasium import spaces

    from interplay.envs.spaces import obs_view

    declared = spaces.Discrete(3) if space == "discrete" else spaces.Box(0, 1, (2, 3), np.float32)
    view = obs_view(declared, "a")
    value = np.zeros((3, 2), np.float32) if obs == "transposed" else obs
    with pytest.raises(ValueError):
        view.flatten(value, np.zeros(view.dim, np.float32))

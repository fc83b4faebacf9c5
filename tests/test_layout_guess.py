"""Which axis of a 3-D observation holds the channels: asked only when a network reads the
frames as images, and a guess that looks unlike a picture is warned about, naming the key."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import ParallelEnv
from torch import nn

from interplay import ConfigError, config, register_env
from interplay.envs.images import image_layout
from interplay.experiment.build import make_algorithm, make_specs, make_vec_env
from interplay.nets.build import ImageBlock

QUIET = {"console": False, "tensorboard": False, "curve": False}
SMALL_CNN = {"channels": [4], "kernels": [2], "strides": [1], "hidden": [8]}


class Planes(ParallelEnv):
    """Two agents that each see a 3-D Box of ``shape`` (``dtype``); one step long."""

    metadata = {"name": "planes_v0"}

    def __init__(self, shape: list[int], dtype: str = "float32"):
        self.possible_agents = ["seat_0", "seat_1"]
        high = 255 if dtype == "uint8" else 1
        self._obs = spaces.Box(0, high, tuple(shape), np.dtype(dtype))
        self._act = spaces.Discrete(2)
        self.agents: list[str] = []

    def observation_space(self, agent):
        return self._obs

    def action_space(self, agent):
        return self._act

    def _frames(self):
        return {a: np.zeros(self._obs.shape, self._obs.dtype) for a in self.agents}

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return self._frames(), {a: {} for a in self.agents}

    def step(self, actions):
        obs = self._frames()
        rewards = {a: 0.0 for a in self.agents}
        done = {a: True for a in self.agents}
        infos = {a: {} for a in self.agents}
        self.agents = []
        return obs, rewards, done, {a: False for a in done}, infos


register_env("layout_planes", Planes)


def build(shape, algo: dict, dtype: str = "float32", policies: dict | None = None):
    cfg = config.validate({
        "env": {"id": "layout_planes", "num_envs": 1,
                "kwargs": {"shape": list(shape), "dtype": dtype}},
        "algo": algo, "policies": policies or {},
        "train": {"seed": 0, "device": "cpu"}, "log": QUIET})
    vec, _ = make_vec_env(cfg)
    return make_algorithm(cfg, make_specs(cfg, vec), "cpu")


def convs(algo) -> list[nn.Conv2d]:
    actor = algo.policies["seat"].actor
    return [m for m in actor.modules() if isinstance(m, nn.Conv2d)]


def layout_warnings(record) -> list[str]:
    return [str(w.message) for w in record if "layout" in str(w.message)]


@pytest.mark.parametrize("shape", [(3, 3, 3), (2, 5, 2)])
@pytest.mark.parametrize("name", ["ippo", "maddpg"])
def test_an_ambiguous_board_too_small_for_the_cnn_gets_an_mlp_without_asking(shape, name):
    # OpenSpiel tic-tac-toe's (3, 3, 3): the default conv layers do not fit, so it is an MLP
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        algo = build(shape, {"name": name})
    assert convs(algo) == [] and not any(isinstance(m, ImageBlock)
                                         for m in algo.policies["seat"].actor.modules())
    assert not layout_warnings(record)


@pytest.mark.parametrize("model", [{"type": "cnn", **SMALL_CNN}, SMALL_CNN])
def test_an_ambiguous_board_is_refused_when_a_cnn_would_read_it(model):
    with pytest.raises(ConfigError, match=r"algo.model: .*\(3, 3, 3\).*set model.layout"):
        build((3, 3, 3), {"name": "ippo", "model": model})


def test_an_ambiguous_board_is_refused_when_only_the_critic_reads_it_as_images():
    with pytest.raises(ConfigError, match=r"algo.model: .*\(3, 3, 3\).*set model.layout"):
        build((3, 3, 3), {"name": "maddpg", "model": {"type": "mlp"},
                          "critic_model": SMALL_CNN})


def test_an_ambiguous_board_is_refused_when_resized():
    with pytest.raises(ConfigError, match=r"algo.model: .*\(4, 6, 4\).*set model.layout"):
        build((4, 6, 4), {"name": "ippo", "model": {"type": "mlp", "resize": [2, 3]}})


@pytest.mark.parametrize("layout,channels", [("hwc", 3), ("chw", 3)])
def test_an_ambiguous_board_with_its_layout_given_gets_its_cnn(layout, channels):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        algo = build((3, 3, 3), {"name": "ippo", "model": {**SMALL_CNN, "layout": layout}})
    assert convs(algo)[0].in_channels == channels and not layout_warnings(record)


@pytest.mark.parametrize("shape,dtype,guess", [
    ((25, 5, 4), "float32", "hwc"),  # Overcooked: 25 planes on a 5x4 grid
    ((6, 7, 2), "int8", "hwc"),  # two planes of a board
    ((5, 6, 20), "uint8", "chw"),
    ((8, 8, 3), "float32", "hwc"),  # float planes, even three of them
])
def test_a_guess_unlike_a_picture_is_warned_about_naming_the_key(shape, dtype, guess):
    with pytest.warns(UserWarning, match=rf"algo.model.layout: .*{shape[0]}, {shape[1]}, "
                                         rf"{shape[2]}.* taken as {guess}.*set algo.model.layout"):
        build(shape, {"name": "ippo"}, dtype)


def test_a_guess_is_warned_about_under_the_policy_key_that_sets_the_layout():
    with pytest.warns(UserWarning, match=r"policies.seat.model.layout: .*set "
                                         r"policies.seat.model.layout: chw"):
        build((25, 5, 4), {"name": "ippo"}, policies={"seat": {"model": {"hidden": [8]}}})


@pytest.mark.parametrize("shape", [(36, 36, 3), (1, 12, 12), (10, 10, 4)])
def test_a_picture_is_guessed_quietly(shape):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert image_layout(shape, "auto", "algo.model", np.uint8) in ("hwc", "chw")


def test_the_layout_given_is_followed_and_never_warned_about():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        algo = build((25, 5, 4), {"name": "ippo", "model": {**SMALL_CNN, "layout": "chw"}})
    assert convs(algo)[0].in_channels == 25
    with pytest.warns(UserWarning, match="layout"):
        algo = build((25, 5, 4), {"name": "ippo", "model": SMALL_CNN})
    assert convs(algo)[0].in_channels == 4  # the guess, as the warning said


def test_resized_frames_keep_the_layout_they_were_read_in():
    # (40, 40, 3) resized to 2x2 is (2, 2, 3): guessed afresh it would read as chw
    algo = build((40, 40, 3), {"name": "ippo", "model": {
        "resize": [2, 2], "channels": [4], "kernels": [1], "strides": [1], "hidden": [8]}},
        dtype="uint8")
    assert convs(algo)[0].in_channels == 3

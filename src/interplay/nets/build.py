"""Networks built from the ``model`` settings, for actors, critics and Q-functions alike.

A network takes flat rows: the concatenation of *parts*, each either a policy's observation
(as the runner hands it: flat, frames stacked, image bytes still bytes) for one or more of its
agents, or plain features (actions, one-hot slots). Observation parts go through an encoder
block, shared by every agent of that policy in the row:

* ``mlp``: the values as they are (image bytes scaled to [0, 1]);
* ``cnn``: the frames reshaped to ``[N, stack * channels, height, width]``, scaled, conv layers;
* ``module:Class``: the user's module, on ``[N, *observation_space.shape]`` floats;
* ``leaves``: a Dict/Tuple observation kept entry by entry, read back and encoded per entry
  (:mod:`interplay.nets.leaves`), or flattened into one vector with ``type: mlp``.

The encoded parts, side by side, feed the hidden layers and the output layer (``mlp``). When
no part needs encoding (no images, no CNN, no user module), the network is exactly that MLP,
built as it always was: same layers, same order, same initialisation. So a centralised critic
on images (MAPPO, MADDPG, MATD3) sees each agent's frames through one CNN (per-agent
features, side by side), not one CNN over every frame at once.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from interplay.config.code import load_callable
from interplay.config.model import ModelSettings, model_for
from interplay.data.ram import check_fits
from interplay.envs.images import frame_shape, image_layout, in_layout, is_image
from interplay.envs.leaves import Leaves
from interplay.errors import ConfigError
from interplay.nets.cnn import conv_out, conv_stack
from interplay.nets.leaves import FlatLeaves, LeafEncoder, conv_inputs, encoders_unused
from interplay.nets.mlp import mlp
from interplay.run.mapping import PolicySpec


@dataclass(frozen=True)
class ObsInput:
    """One policy's observation as its networks are handed it: a flat row of ``dim`` values."""

    pid: str
    model: ModelSettings  # the policy's own (merged) settings
    where: str  # the config key of those settings, for errors
    shape: tuple[int, ...]  # one observation as the policy sees it (after preprocessing)
    stack: int  # frames stacked
    layout: str | None  # "hwc" or "chw" for images, else None
    scale: bool  # image bytes: scaled to [0, 1] in the network
    action_space: spaces.Space
    ambiguous: bool = False  # ``layout`` is a placeholder: either axis could hold the channels
    leaves: Leaves | None = None  # a Dict/Tuple kept entry by entry (image bytes as bytes)

    @property
    def dim(self) -> int:
        return int(np.prod(self.shape)) * self.stack

    def frames(self) -> tuple[int, int, int]:
        """``(stack * channels, height, width)`` of a CNN's input."""
        c, h, w = frame_shape(self.shape, self.layout or "chw")
        return self.stack * c, h, w

    def user_space(self) -> spaces.Box:
        """The observation space a user module is built with: what its ``forward`` is given."""
        if self.leaves is not None:
            return spaces.Box(-np.inf, np.inf, (self.leaves.flat_dim * self.stack,), np.float32)
        if self.layout is None:
            return spaces.Box(-np.inf, np.inf, (self.dim,), np.float32)
        shape = in_layout(self.frames(), self.layout)
        return spaces.Box(0.0, 1.0 if self.scale else np.inf, shape, np.float32)


def model_key(spec: PolicySpec, field: str = "model") -> str:
    """The config key naming a policy's network settings."""
    return f"policies.{spec.id}.model" if field == "model" and spec.config.model else f"algo.{field}"


def policy_model(settings: Any, spec: PolicySpec, field: str = "model") -> ModelSettings:
    model = model_for(settings, spec.config.model if field == "model" else {}, spec.id, field)
    if model is None:
        raise ConfigError(f"algo.{field}: the algorithm's settings have no network settings")
    return model


def obs_input(spec: PolicySpec, model: ModelSettings, where: str) -> ObsInput:
    view = spec.obs_view
    grid = view.plain and len(view.shape) == 3
    image = grid and is_image(spec.obs_space)
    # a 3-D Box beside an action_mask (a board: connect four's 6x7x2) takes a CNN when asked
    shape = tuple(view.shape)
    layout, guessed = None, False
    if spec.prep is not None:  # resized or grayed: the frames keep the layout prep read them in
        layout = spec.prep.layout
    elif image or (grid and model.type == "cnn"):
        layout = image_layout(shape, model.layout, where, view.dtype, needed=False)
        guessed = model.layout == "auto" and shape[0] == shape[-1]
    if view.leaves is None:
        encoders_unused(model, where, spec.id, "its observations have no image entries to "
                        f"encode one by one ({spec.obs_space})")
    return ObsInput(spec.id, model, where, shape if view.plain else (view.dim,),
                    spec.config.stack_size, layout, image and view.dtype == np.uint8,
                    spec.action_space, ambiguous=guessed, leaves=view.leaves)


Part = tuple["ObsInput | int", int]
"""A piece of a network's input: an observation and how many agents' of it, or a width."""


def network(model: ModelSettings, parts: list[Part], out_dim: int, out_gain: float,
            where: str, mirror: bool = True) -> nn.Module:
    """Encoder (if any) -> hidden layers -> a layer of ``out_dim`` (gain ``out_gain``), made
    left-right symmetric when ``model.mirror`` says so (and ``mirror`` does not forbid it: a
    caller that wraps the network further mirrors the whole itself)."""
    net = _network(model, parts, out_dim, out_gain, where)
    return mirrored(net, model, parts, out_dim, where) if mirror else net


def _network(model: ModelSettings, parts: list[Part], out_dim: int, out_gain: float,
             where: str) -> nn.Module:
    enc = encoder(model, parts, where)
    if model.head == "spatial" and out_dim > 1:
        return SpatialHead(enc, parts, out_dim, head_settings(model), out_gain, where)
    if enc is None:
        check_network_fits(mlp_params(width(parts), out_dim, model), f"{where}.hidden",
                           model.hidden)
        return mlp(width(parts), out_dim, model, out_gain)
    head = head_settings(model)
    check_network_fits(mlp_params(enc.out_features, out_dim, head), f"{where}.hidden",
                       head.hidden)
    return nn.Sequential(enc, mlp(enc.out_features, out_dim, head, out_gain))


def mirrored(net: nn.Module, model: ModelSettings, parts: list[Part], out_dim: int,
             where: str) -> nn.Module:
    """``net`` as :class:`Mirrored` when ``model.mirror`` asks for it (refused by name where
    the network's input or outputs have no mirror image), else ``net``."""
    if not model.mirror:
        return net
    obs = parts[0][0]
    if len(parts) != 1 or parts[0][1] != 1 or not isinstance(obs, ObsInput) or (
            obs.layout is None or obs.leaves is not None):
        if out_dim == 1:  # a value over several inputs (a central critic) stays as it is
            return net
        raise ConfigError(f"{where}.mirror mirrors one image observation; this network reads "
                          f"{'several inputs' if len(parts) != 1 else 'no image'}; "
                          "set mirror: false")
    _, h, w = obs.frames()
    if out_dim != 1 and not (isinstance(obs.action_space, spaces.Discrete)
                             and out_dim in (w, h * w)):
        raise ConfigError(
            f"{where}.mirror puts a mirrored answer back in place for one output per column or "
            f"cell of policy {obs.pid!r}'s {h}x{w} image (Discrete actions) or one value; "
            f"this network gives {out_dim} outputs for {obs.action_space}; set mirror: false")
    return Mirrored(net, obs, out_dim)


class Mirrored(nn.Module):
    """``net`` made left-right symmetric (``model.mirror``): the mean of its answer for an
    image and, put back in place, its answer for the mirror image."""

    def __init__(self, net: nn.Module, obs: ObsInput, out_dim: int):
        super().__init__()
        self.net, self.obs, self.out_dim = net, obs, out_dim
        _, self.h, self.w = obs.frames()
        # the width axis of one frame, counted from the end of [..., stack, *shape]
        self.width_axis = -2 if obs.layout == "hwc" else -1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        frames = x.reshape(*lead, self.obs.stack, *self.obs.shape)
        flipped = frames.flip(self.width_axis).reshape(x.shape)
        both = self.net(torch.cat([x.reshape(-1, x.shape[-1]),
                                   flipped.reshape(-1, x.shape[-1])]))
        own, other = both.chunk(2)
        if self.out_dim == self.w:
            other = other.flip(-1)
        elif self.out_dim == self.h * self.w:  # (a 1x1 image's one value: flipped as it is)
            other = other.reshape(-1, self.h, self.w).flip(-1).reshape(-1, self.out_dim)
        return ((own + other) / 2).reshape(*lead, self.out_dim)


class SpatialHead(nn.Module):
    """One output per column (or cell) of a CNN's map, each from the same hidden layers over
    that column's (cell's) features (``model.head: spatial``)."""

    def __init__(self, enc: Encoder | None, parts: list[Part], out_dim: int,
                 model: ModelSettings, out_gain: float, where: str):
        super().__init__()
        obs = parts[0][0]
        if (enc is None or len(parts) != 1 or parts[0][1] != 1 or not isinstance(obs, ObsInput)
                or not isinstance(enc.blocks[0], ImageBlock)):
            raise ConfigError(f"{where}.head: spatial reads the conv layers' map of one "
                              "image observation; this network reads "
                              f"{'several inputs' if len(parts) != 1 else 'no image'}; use "
                              "head: dense")
        _, h, w = obs.frames()
        h, w = conv_out(h, w, model)
        c = model.channels[-1]
        if out_dim not in (w, h * w):
            raise ConfigError(
                f"{where}.head: spatial gives one output per column or cell of the conv "
                f"layers' {h}x{w} map, but policy {obs.pid!r} needs {out_dim} (one per "
                f"action); give paddings that keep the board's size, or use head: dense")
        self.enc, self.shape, self.columns = enc, (c, h, w), out_dim == w
        in_dim = c * h if self.columns else c
        check_network_fits(mlp_params(in_dim, 1, model), f"{where}.hidden", model.hidden)
        self.each = mlp(in_dim, 1, model, out_gain)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.read(self.enc(x))

    def read(self, y: torch.Tensor) -> torch.Tensor:
        """The outputs from the encoder's flattened map ``[..., c·h·w]``."""
        lead = y.shape[:-1]
        c, h, w = self.shape
        y = y.reshape(-1, c, h, w)
        if self.columns:  # [N, w, c·h]: a column's features from every row
            y = y.permute(0, 3, 1, 2).reshape(-1, w, c * h)
        else:  # [N, h·w, c]: a cell's features
            y = y.permute(0, 2, 3, 1).reshape(-1, h * w, c)
        return self.each(y).reshape(*lead, -1)


BYTES_PER_PARAM = 16
"""What one float32 parameter costs in training: its value, its gradient and Adam's two moments."""


def mlp_params(in_dim: int, out_dim: int, model: ModelSettings) -> int:
    """Parameters of ``model``'s hidden layers and an output layer, from the widths alone."""
    widths = [in_dim, *model.hidden, out_dim]
    norms = 2 * sum(model.hidden) if model.layer_norm else 0
    return sum(a * b + b for a, b in zip(widths, widths[1:], strict=False)) + norms


def conv_params(channels: int, model: ModelSettings) -> int:
    """Parameters of ``model``'s conv layers over ``channels`` input channels."""
    total, c = 0, channels
    for out, k in zip(model.channels, model.kernels, strict=True):
        total += c * out * k * k + out
        c = out
    return total


def check_network_fits(params: int, key: str, value: Any, fix: str | None = None) -> None:
    """Refuse a network whose parameters cannot be trained in the memory free, before torch
    tries to allocate them; ``key`` is the setting that sized it, at ``value``."""
    check_fits(params * BYTES_PER_PARAM, key,
               f"a network of {params:,} parameters ({key}: {value}; weights, gradients and "
               f"Adam's moments at {BYTES_PER_PARAM} bytes each)", fix)


def head_settings(model: ModelSettings) -> ModelSettings:
    """What follows the encoder: ``model``'s hidden layers, or none after a user module."""
    return model.model_copy(update={"hidden": []}) if is_user(model) else model


def width(parts: list[Part]) -> int:
    return sum((p.dim if isinstance(p, ObsInput) else p) * n for p, n in parts)


def is_user(model: ModelSettings) -> bool:
    return ":" in model.type


def encoder(model: ModelSettings, parts: list[Part], where: str) -> Encoder | None:
    """The blocks ``model`` puts in front of the hidden layers; None when none is needed."""
    own = next((p for p, _ in parts if isinstance(p, ObsInput)), None)
    if model.type == "cnn" and own is not None and own.layout is None and own.leaves is None:
        raise ConfigError(f"{where}.type: cnn takes image observations (a 3-D Box), but policy "
                          f"{own.pid!r} sees observations of shape {own.shape}; use mlp or auto")
    kinds = {p.pid: _kind(model, p, where) for p, _ in parts if isinstance(p, ObsInput)}
    if all(k == "flat" for k in kinds.values()):
        return None
    return Encoder(model, parts, kinds, where)


def _kind(model: ModelSettings, obs: ObsInput, where: str) -> str:
    if obs.leaves is not None:
        return _leaves_kind(model, obs, where)
    if is_user(model):
        return _as_images("module", obs)
    if obs.layout is not None and model.type in ("auto", "cnn"):
        _, h, w = obs.frames()
        if min(conv_out(h, w, model)) >= 1:
            return _as_images("cnn", obs)
        why = (f"the conv layers (kernels {model.kernels}, strides {model.strides}) do not fit "
               f"policy {obs.pid!r}'s {h}x{w} images")
        if model.type == "cnn":
            raise ConfigError(f"{where}: {why}; give smaller kernels or strides, a larger "
                              "resize, or type: mlp")
        warnings.warn(f"{where}: {why}, so they go flattened into an MLP; for a CNN give "
                      "smaller kernels and strides or a larger resize (or type: mlp to say so)",
                      stacklevel=2)
    return "scaled" if obs.scale else "flat"


def _leaves_kind(model: ModelSettings, obs: ObsInput, where: str) -> str:
    """How a Dict/Tuple kept entry by entry is read: by a user's module on the flattened
    floats, flattened (``mlp``: as it always was when the row is floats already), or per
    entry."""
    assert obs.leaves is not None
    if is_user(model) or model.type == "mlp":
        if model.encoders:  # a preset's encoders, with type: mlp given over them to compare
            warnings.warn(f"{where}.encoders are not used: type {model.type} reads the "
                          f"observations of policy {obs.pid!r} flattened, not entry by entry",
                          UserWarning, stacklevel=2)
        if is_user(model):
            return "module"
        return "flat_leaves" if obs.leaves.bytes else "flat"
    return "leaves"


def _as_images(kind: str, obs: ObsInput) -> str:
    """``kind``, a block that reads the frames as images: only once their channel axis is known
    (an MLP sees the same flat rows whichever axis holds them, so it never asks)."""
    if obs.ambiguous:
        image_layout(obs.shape, "auto", obs.where)  # raises, naming the shape and the key
    return kind


class Encoder(nn.Module):
    """Encodes each part of flat input rows ``[..., in]`` and puts the results side by side."""

    def __init__(self, model: ModelSettings, parts: list[Part], kinds: dict[str, str],
                 where: str):
        super().__init__()
        self.blocks = nn.ModuleList()
        index: dict[str, int] = {}
        self.layout: list[tuple[int, int, int, int]] = []  # (start, end, agents, block or -1)
        at = out = 0
        for part, n in parts:
            if isinstance(part, ObsInput):
                if part.pid not in index:
                    index[part.pid] = len(self.blocks)
                    self.blocks.append(_block(kinds[part.pid], model, part, where))
                block = index[part.pid]
                step = part.dim
                out += n * self.blocks[block].out_features
            else:
                block, step = -1, part
                out += n * part
            self.layout.append((at, at + n * step, n, block))
            at += n * step
        self.in_features, self.out_features = at, out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        x = x.reshape(-1, x.shape[-1])
        outs = []
        for start, end, n, block in self.layout:
            piece = x[:, start:end]
            if block < 0:
                outs.append(piece.float())
            else:
                y = self.blocks[block](piece.reshape(x.shape[0] * n, -1))
                outs.append(y.reshape(x.shape[0], -1))
        y = outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)
        return y.reshape(*lead, y.shape[-1])


def _block(kind: str, model: ModelSettings, obs: ObsInput, where: str) -> nn.Module:
    if kind == "leaves":
        assert obs.leaves is not None
        for key, channels, conv in conv_inputs(obs.leaves, obs.stack, model, where, obs.pid):
            check_network_fits(conv_params(channels, conv), f"{key}.channels", conv.channels)
        return LeafEncoder(obs.leaves, obs.stack, model, where, obs.pid)
    if kind == "flat_leaves":
        assert obs.leaves is not None
        return FlatLeaves(obs.leaves, obs.stack)
    if kind == "cnn":
        check_network_fits(conv_params(obs.frames()[0], model), f"{where}.channels",
                           model.channels)
        return ImageBlock(obs, model)
    if kind == "module":
        return UserBlock(obs, model, where)
    return Scaled(obs)


def _scaled(x: torch.Tensor, scale: bool) -> torch.Tensor:
    return x.float() * (1.0 / 255.0) if scale else x.float()


class Scaled(nn.Module):
    """Flat rows as floats, image bytes scaled to [0, 1]."""

    def __init__(self, obs: ObsInput):
        super().__init__()
        self.scale, self.out_features = obs.scale, obs.dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _scaled(x, self.scale)


def _frames(x: torch.Tensor, obs: ObsInput, channels_first: bool) -> torch.Tensor:
    """Flat rows ``[N, stack * dim]`` as images with the stacked frames along the channels:
    ``[N, stack * C, H, W]``, or in the observation's own layout (``channels_first`` False)."""
    n = x.shape[0]
    x = x.reshape(n, obs.stack, *obs.shape)
    c, h, w = frame_shape(obs.shape, obs.layout or "chw")
    if obs.layout == "hwc":
        if channels_first:
            return x.permute(0, 1, 4, 2, 3).reshape(n, obs.stack * c, h, w)
        return x.permute(0, 2, 3, 1, 4).reshape(n, h, w, obs.stack * c)
    return x.reshape(n, obs.stack * c, h, w)


class ImageBlock(nn.Module):
    """A policy's stacked frames through the conv layers."""

    def __init__(self, obs: ObsInput, model: ModelSettings):
        super().__init__()
        self.obs = obs
        c, h, w = obs.frames()
        self.convs, self.out_features = conv_stack(c, h, w, model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.convs(_frames(_scaled(x, self.obs.scale), self.obs, channels_first=True))


class UserBlock(nn.Module):
    """A user's module on a policy's observations, shaped as its observation space says."""

    def __init__(self, obs: ObsInput, model: ModelSettings, where: str):
        super().__init__()
        self.obs = obs
        self.space = obs.user_space()
        self.module = user_module(model, self.space, obs.action_space, where)
        self.out_features = _dry_run(self.module, self.space, model.type, where)
        self.flat = FlatLeaves(obs.leaves, obs.stack) if obs.leaves is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.flat(x) if self.flat is not None else _scaled(x, self.obs.scale)
        if self.obs.layout is not None:
            x = _frames(x, self.obs, channels_first=False)
        return self.module(x)


def user_module(model: ModelSettings, space: spaces.Box, action_space: spaces.Space,
                where: str) -> nn.Module:
    """``model.type``'s class built as ``Class(observation_space, action_space, **kwargs)``."""
    name = model.type
    cls = load_callable(name, f"{where}.type")
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ConfigError(f"{where}.type: {name!r} is not a torch.nn.Module subclass; a network "
                          "of your own is a class Class(nn.Module) built as "
                          "Class(observation_space, action_space, **kwargs)")
    try:
        module = cls(space, action_space, **model.kwargs)
    except TypeError as err:
        raise ConfigError(
            f"{where}.type: {name!r} cannot be built as {cls.__name__}(observation_space, "
            f"action_space, **{where}.kwargs) with kwargs {model.kwargs}: {err}") from err
    except Exception as err:
        raise ConfigError(f"{where}.type: building {name!r} raised {type(err).__name__}: "
                          f"{err}") from err
    if not isinstance(module, nn.Module):
        raise ConfigError(f"{where}.type: {name!r} built a {type(module).__name__}, not a "
                          "torch.nn.Module")
    return module


def _dry_run(module: nn.Module, space: spaces.Box, name: str, where: str) -> int:
    """The width of ``module``'s features, from one forward pass on a batch of zeros."""
    batch = torch.zeros((2, *space.shape))
    was_training = module.training
    module.train(False)
    try:
        with torch.no_grad():
            out = module(batch)
    except Exception as err:
        raise ConfigError(f"{where}.type: {name!r} failed on a batch of shape "
                          f"{list(batch.shape)} (float32, [N, *observation_space.shape]): "
                          f"{type(err).__name__}: {err}") from err
    finally:
        module.train(was_training)
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != 2 \
            or not out.is_floating_point():
        got = (f"a tensor of shape {list(out.shape)} ({out.dtype})"
               if isinstance(out, torch.Tensor) else f"a {type(out).__name__}")
        raise ConfigError(f"{where}.type: {name!r} maps a batch of shape {list(batch.shape)} "
                          f"to {got}; it must return float features of shape [N, F] (N = 2 "
                          "here: one row per observation)")
    declared = getattr(module, "out_features", None)
    if declared is not None and declared != out.shape[1]:
        raise ConfigError(f"{where}.type: {name!r} says out_features = {declared} but returns "
                          f"{out.shape[1]} features per observation")
    return int(out.shape[1])

"""Encoders for Dict and Tuple observations kept entry by entry (:mod:`interplay.envs.leaves`).

A :class:`LeafEncoder` reads a policy's rows (frames stacked, image bytes still bytes) back
into their entries and encodes each: a CNN per image entry (its stacked frames along the
channels), an MLP over the other entries together, or what ``model.encoders`` names for an
entry; the features go side by side to the hidden layers. :class:`FlatLeaves` is ``type:
mlp``'s reading: every entry flattened into one vector, as flattening the observation gives.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from interplay.config.model import EncoderSettings, ModelSettings
from interplay.envs.images import frame_shape, image_layout
from interplay.envs.leaves import Leaf, Leaves
from interplay.errors import ConfigError
from interplay.nets.cnn import conv_out, conv_stack
from interplay.nets.mlp import ACTIVATIONS, init_linear

REST = "the other entries"
"""What the default MLP over the entries ``model.encoders`` does not name is called in errors."""


def _scaled(x: torch.Tensor, leaf: Leaf) -> torch.Tensor:
    return x * (1.0 / 255.0) if leaf.dtype == np.uint8 else x


class FlatLeaves(nn.Module):
    """Rows as the flattened observation: each stacked frame's entries side by side, in the
    space's order, image bytes scaled to [0, 1]."""

    def __init__(self, leaves: Leaves, stack: int):
        super().__init__()
        self.leaves, self.stack = leaves, stack
        self.out_features = leaves.flat_dim * stack

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = self.leaves.decode(x, self.stack)
        y = torch.cat([_scaled(parts[leaf.key], leaf) for leaf in self.leaves.leaves], dim=-1)
        return y.reshape(x.shape[0], -1)


@dataclass(frozen=True)
class Plan:
    """One encoder block: the entries it reads and how."""

    keys: tuple[str, ...]
    kind: str  # "cnn" or "mlp"
    settings: EncoderSettings
    where: str  # its config key, for errors


def plans(leaves: Leaves, model: ModelSettings, where: str, pid: str) -> list[Plan]:
    """The blocks for ``leaves``: one per image entry and one per entry ``model.encoders``
    names, then one MLP over the remaining entries; unknown keys refused."""
    unknown = [k for k in model.encoders if k not in leaves.keys]
    if unknown:
        raise ConfigError(f"{where}.encoders.{unknown[0]}: the observations of policy {pid!r} have "
                          f"no entry {unknown[0]!r}; their entries are {leaves.keys}")
    out, rest = [], []
    for leaf in leaves.leaves:
        key = f"{where}.encoders.{leaf.key}"
        if leaf.key in model.encoders:
            out.append(_plan(leaf, model.encoders[leaf.key], model, key))
        elif leaf.image:
            out.append(_plan(leaf, EncoderSettings(), model, key))
        else:
            rest.append(leaf.key)
    if rest:
        out.append(Plan(tuple(rest), "mlp", EncoderSettings(), f"{where} ({REST}: {rest})"))
    return out


def _plan(leaf: Leaf, enc: EncoderSettings, model: ModelSettings, where: str) -> Plan:
    if enc.type == "mlp":
        return Plan((leaf.key,), "mlp", enc, where)
    if not leaf.image:
        if enc.type == "cnn":
            raise ConfigError(f"{where}.type: cnn takes image entries (a Box of rank 2 or 3), "
                              f"but entry {leaf.key!r} is {leaf.space}; use mlp or auto")
        return Plan((leaf.key,), "mlp", enc, where)
    conv = _conv_settings(enc, model, where)
    _, h, w = _frame(leaf, _layout(leaf, enc, model, where))
    if min(conv_out(h, w, conv)) >= 1:
        return Plan((leaf.key,), "cnn", enc, where)
    why = (f"the conv layers (kernels {conv.kernels}, strides {conv.strides}) do not fit entry "
           f"{leaf.key!r}'s {h}x{w} images")
    if enc.type == "cnn":
        raise ConfigError(f"{where}: {why}; give smaller kernels or strides, or type: mlp")
    warnings.warn(f"{where}: {why}, so they go flattened into an MLP; for a CNN give smaller "
                  "kernels and strides (or type: mlp to say so)", UserWarning, stacklevel=2)
    return Plan((leaf.key,), "mlp", enc, where)


def _conv_settings(enc: EncoderSettings, model: ModelSettings, where: str) -> ModelSettings:
    """``model`` with the entry's own conv layers, where it gives them (kept of its own class:
    a critic's settings hold more keys than an actor's)."""
    update = {k: v for k in ("channels", "kernels", "strides", "paddings")
              if (v := getattr(enc, k)) is not None}
    try:
        return type(model).model_validate({**model.model_dump(), **update})
    except ValueError as err:
        raise ConfigError(f"{where}: {err}") from None


def _layout(leaf: Leaf, enc: EncoderSettings, model: ModelSettings, where: str) -> str:
    if len(leaf.shape) == 2:
        return "chw"  # one channel: frame_shape reads it as (1, H, W)
    return image_layout(leaf.shape, enc.layout or model.layout, f"{where}", leaf.space.dtype)


def _frame(leaf: Leaf, layout: str) -> tuple[int, int, int]:
    """``(channels, height, width)`` of one of the entry's frames."""
    if len(leaf.shape) == 2:
        return 1, leaf.shape[0], leaf.shape[1]
    return frame_shape(leaf.shape, layout)


class LeafCNN(nn.Module):
    """One image entry's stacked frames through conv layers: ``[N, stack, size]`` in."""

    def __init__(self, leaf: Leaf, stack: int, layout: str, conv: ModelSettings):
        super().__init__()
        self.leaf, self.stack, self.layout = leaf, stack, layout
        self.c, self.h, self.w = _frame(leaf, layout)
        self.convs, self.out_features = conv_stack(stack * self.c, self.h, self.w, conv)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        x = _scaled(x, self.leaf)
        if self.layout == "hwc" and len(self.leaf.shape) == 3:
            x = x.reshape(n, self.stack, self.h, self.w, self.c).permute(0, 1, 4, 2, 3)
        return self.convs(x.reshape(n, self.stack * self.c, self.h, self.w))


class LeafMLP(nn.Module):
    """Some entries' stacked values, side by side, through linear layers."""

    def __init__(self, leaves: list[Leaf], stack: int, hidden: list[int], activation: str):
        super().__init__()
        self.leaves = leaves
        width = stack * sum(leaf.size for leaf in leaves)
        layers: list[nn.Module] = []
        for out in hidden:
            layers += [init_linear(nn.Linear(width, out), np.sqrt(2)), ACTIVATIONS[activation]()]
            width = out
        self.body = nn.Sequential(*layers)
        self.out_features = width

    def forward(self, parts: list[torch.Tensor]) -> torch.Tensor:
        n = parts[0].shape[0]
        x = torch.cat([_scaled(p, leaf) for p, leaf in zip(parts, self.leaves, strict=True)],
                      dim=-1)
        return self.body(x.reshape(n, -1))


class LeafEncoder(nn.Module):
    """A policy's rows (``[N, stack * dim]``) read back into entries, each block's features
    side by side."""

    def __init__(self, leaves: Leaves, stack: int, model: ModelSettings, where: str, pid: str):
        super().__init__()
        self.leaves, self.stack = leaves, stack
        self.plans = plans(leaves, model, where, pid)
        self.blocks = nn.ModuleList(self._block(p, model) for p in self.plans)
        self.out_features = sum(b.out_features for b in self.blocks)

    def _block(self, plan: Plan, model: ModelSettings) -> nn.Module:
        leaves = [self.leaves.leaf(k) for k in plan.keys]
        if plan.kind == "cnn":
            leaf = leaves[0]
            conv = _conv_settings(plan.settings, model, plan.where)
            return LeafCNN(leaf, self.stack, _layout(leaf, plan.settings, model, plan.where),
                           conv)
        return LeafMLP(leaves, self.stack, plan.settings.hidden, model.activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = self.leaves.decode(x, self.stack)
        outs = []
        for plan, block in zip(self.plans, self.blocks, strict=True):
            if isinstance(block, LeafCNN):
                outs.append(block(parts[plan.keys[0]]))
            else:
                outs.append(block([parts[k] for k in plan.keys]))
        return torch.cat(outs, dim=-1) if len(outs) > 1 else outs[0]

    def describe(self) -> list[tuple[tuple[str, ...], str]]:
        """Which entries each block reads, and how (``cnn`` or ``mlp``)."""
        return [(p.keys, p.kind) for p in self.plans]


def conv_inputs(leaves: Leaves, stack: int, model: ModelSettings, where: str,
                pid: str) -> list[tuple[str, int, ModelSettings]]:
    """Each CNN block's config key, input channels and conv settings: what sizes its
    parameters before they are made."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the encoder built next says it, once
        made = plans(leaves, model, where, pid)
    for plan in made:
        if plan.kind == "cnn":
            leaf = leaves.leaf(plan.keys[0])
            layout = _layout(leaf, plan.settings, model, plan.where)
            out.append((plan.where, stack * _frame(leaf, layout)[0],
                        _conv_settings(plan.settings, model, plan.where)))
    return out


def encoders_unused(model: ModelSettings, where: str, pid: str, why: str) -> None:
    """Refuse ``model.encoders`` where no observation is encoded entry by entry."""
    if model.encoders:
        key = next(iter(model.encoders))
        raise ConfigError(f"{where}.encoders.{key}: {why} (policy {pid!r}); remove "
                          f"{where}.encoders")

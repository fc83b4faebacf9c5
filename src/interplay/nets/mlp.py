"""The networks PPO-style algorithms build: MLPs with orthogonal init, one per agent or shared."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU, "silu": nn.SiLU,
}


class NetSettings(BaseModel):
    """The shape of one group's networks."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    hidden: list[int] = Field(default_factory=lambda: [64, 64])
    """Widths of the hidden layers."""
    activation: Literal["tanh", "relu", "elu", "gelu", "silu"] = "tanh"
    """Nonlinearity after each hidden layer."""


def mlp(in_dim: int, out_dim: int, net: NetSettings, out_gain: float) -> nn.Sequential:
    """Linear layers with ``net``'s activation between them; orthogonal weights, zero biases.

    Hidden layers get gain sqrt(2); the last gets ``out_gain`` (small for policy heads, so that
    a fresh policy is near uniform).
    """
    layers: list[nn.Module] = []
    width = in_dim
    for h in net.hidden:
        layers += [_init(nn.Linear(width, h), np.sqrt(2)), ACTIVATIONS[net.activation]()]
        width = h
    layers.append(_init(nn.Linear(width, out_dim), out_gain))
    return nn.Sequential(*layers)


def _init(layer: nn.Linear, gain: float) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class PerAgent(nn.Module):
    """One network for all of a policy's agents, or one each; rows pick theirs by slot."""

    def __init__(self, make: Callable[[], nn.Module], agents: int, shared: bool):
        super().__init__()
        self.nets = nn.ModuleList([make() for _ in range(1 if shared else agents)])

    def forward(self, x: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
        if len(self.nets) == 1:
            return self.nets[0](x)
        parts = [(slot == j).nonzero().squeeze(1) for j in range(len(self.nets))]
        outs = [net(x[rows]) for net, rows in zip(self.nets, parts, strict=True)]
        out = x.new_empty((x.shape[0], *outs[0].shape[1:]))
        for rows, y in zip(parts, outs, strict=True):
            out[rows] = y
        return out

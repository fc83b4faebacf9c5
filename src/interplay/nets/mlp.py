"""MLPs with orthogonal init (one agent's network; :mod:`interplay.nets.agents` puts them over a
policy's agents)."""

from __future__ import annotations

import numpy as np
from torch import nn

from interplay.config.model import ModelSettings

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU, "silu": nn.SiLU,
}


def mlp(in_dim: int, out_dim: int, net: ModelSettings, out_gain: float) -> nn.Sequential:
    """Linear layers with ``net``'s activation between them; orthogonal weights, zero biases.

    Hidden layers get gain sqrt(2) (and a layer norm before the activation with
    ``net.layer_norm``); the last gets ``out_gain`` (small for policy heads, so that a fresh
    policy is near uniform).
    """
    layers: list[nn.Module] = []
    width = in_dim
    for h in net.hidden:
        layers.append(init_linear(nn.Linear(width, h), np.sqrt(2)))
        if net.layer_norm:
            layers.append(nn.LayerNorm(h))
        layers.append(ACTIVATIONS[net.activation]())
        width = h
    layers.append(init_linear(nn.Linear(width, out_dim), out_gain))
    return nn.Sequential(*layers)


def init_linear(layer: nn.Linear, gain: float) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer

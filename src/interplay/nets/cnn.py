"""Conv layers for image observations: ReLU after each, orthogonal weights, zero biases."""

from __future__ import annotations

import numpy as np
from torch import nn

from interplay.config.model import ModelSettings


def conv_out(height: int, width: int, model: ModelSettings) -> tuple[int, int]:
    """The height and width after ``model``'s conv layers; < 1 when they do not fit."""
    for k, s, p in zip(model.kernels, model.strides, paddings(model), strict=True):
        height, width = height + 2 * p, width + 2 * p
        if height < k or width < k:
            return 0, 0
        height, width = (height - k) // s + 1, (width - k) // s + 1
    return height, width


def paddings(model: ModelSettings) -> list[int]:
    """Each conv layer's padding (none given: 0)."""
    return model.paddings if model.paddings is not None else [0] * len(model.kernels)


def conv_stack(channels: int, height: int, width: int, model: ModelSettings) -> tuple[nn.Sequential, int]:
    """Conv layers over ``[N, channels, height, width]``, flattened; and their output width."""
    layers: list[nn.Module] = []
    c = channels
    for out, k, s, p in zip(model.channels, model.kernels, model.strides, paddings(model),
                            strict=True):
        conv = nn.Conv2d(c, out, k, s, p)
        nn.init.orthogonal_(conv.weight, np.sqrt(2))
        nn.init.zeros_(conv.bias)
        layers += [conv, nn.ReLU()]
        c = out
    h, w = conv_out(height, width, model)
    return nn.Sequential(*layers, nn.Flatten()), c * h * w

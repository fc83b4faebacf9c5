"""Networks of a user's own, named in configs as ``user_nets:Class``."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class PooledColour(nn.Module):
    """Mean colour of each frame (HWC), then a linear layer: features [N, width]."""

    def __init__(self, observation_space, action_space, width: int = 16):
        super().__init__()
        self.channels = observation_space.shape[-1]
        self.linear = nn.Linear(self.channels, width)
        self.out_features = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dtype == torch.float32 and float(x.max()) <= 1.0
        return torch.relu(self.linear(x.mean(dim=(1, 2))))


class FlatFeatures(nn.Module):
    """Any observation, flattened, through one layer."""

    def __init__(self, observation_space, action_space, width: int = 8):
        super().__init__()
        self.linear = nn.Linear(int(np.prod(observation_space.shape)), width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(x.flatten(1)))


class NoSpaces(nn.Module):
    def __init__(self, width: int):
        super().__init__()


class NotAModule:
    def __init__(self, observation_space, action_space):
        pass


class OneFeatureVector(nn.Module):
    """Returns [F] instead of [N, F]."""

    def __init__(self, observation_space, action_space):
        super().__init__()
        self.linear = nn.Linear(int(np.prod(observation_space.shape)), 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.flatten(1)).sum(0)


class WrongWidth(FlatFeatures):
    out_features = 99

"""Greedy acting as plain torch modules, for exported policies.

Each module takes what an actor is handed (flat observation rows ``[n, dim]``, legal actions
``[n, actions]`` as bool, recurrent state ``[n, size]``, zero-wide when there is none) and
returns the action the actor takes when not exploring, before it is mapped into the env's
bounds, and the next recurrent state. They hold no RNG and no NumPy, so TorchScript and
ONNX can trace them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from interplay.nets.distributions import MASKED


def masked_argmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The best legal action per row (every action is legal where ``mask`` is all True)."""
    return scores.masked_fill(~mask, MASKED).argmax(dim=1)


class Standardise(nn.Module):
    """Observation statistics frozen into the module: ``(x - mean) / std``, clipped."""

    def __init__(self, norm: Any, clip: float):
        super().__init__()
        self.register_buffer("mean", torch.as_tensor(np.asarray(norm.mean, np.float32)))
        self.register_buffer("std", torch.as_tensor(np.asarray(norm.std, np.float32)))
        self.clip = clip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean) / self.std).clamp(-self.clip, self.clip)


class GreedyPolicy(nn.Module):
    """An actor-critic's actor (PPO): logits per component (masked) or the Gaussian mean."""

    def __init__(self, actor: nn.Module, sizes: list[int] | None, box_dim: int,
                 norm: nn.Module | None, recurrent: bool):
        super().__init__()
        self.actor = actor
        self.sizes = sizes
        self.box_dim = box_dim
        self.norm = norm if norm is not None else nn.Identity()
        self.recurrent = recurrent
        self.state_size = int(actor.state_size) if recurrent else 0

    def forward(self, obs: torch.Tensor, mask: torch.Tensor,
                state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.norm(obs)
        if self.recurrent:
            out, state = self.actor.step(x, state)
        else:
            out = self.actor(x)
        if self.sizes is None:
            return out[:, :self.box_dim], state
        logits = out.masked_fill(~mask, MASKED)
        picks = [part.argmax(dim=1) for part in logits.split(self.sizes, dim=1)]
        return (picks[0] if len(picks) == 1 else torch.stack(picks, dim=1)), state


class GreedyQ(nn.Module):
    """A Q network's best legal action (DQN), or a deterministic actor's (MADDPG, SAC): its
    argmax over legal actions, or its Box output (``tanh`` of the mean for SAC)."""

    def __init__(self, net: nn.Module, discrete: bool, box: str = ""):
        super().__init__()
        self.net = net
        self.discrete = discrete
        self.box = box  # "": the output as it is; "tanh_mean": tanh of its first half
        self.state_size = 0

    def forward(self, obs: torch.Tensor, mask: torch.Tensor,
                state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.net(obs)
        if self.discrete:
            return masked_argmax(out, mask), state
        if self.box == "tanh_mean":
            out = torch.tanh(out[:, :out.shape[1] // 2])
        return out, state

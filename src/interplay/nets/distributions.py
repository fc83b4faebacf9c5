"""Action distributions over a network's output: categorical (masked), per-component
categorical for MultiDiscrete, and diagonal Gaussian with a state-independent log-std."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from interplay.envs.spaces import ActionView

MASKED = -1e9  # the logit of an illegal action: its probability underflows to exactly 0


class ActionDist:
    """Samples, log-probabilities and entropies of one policy's actions, in batches.

    The network's output is logits (``out_dim`` wide) for discrete kinds, and the Gaussian
    mean followed by the log-std for a Box.
    """

    def __init__(self, view: ActionView):
        self.kind = view.kind
        self.shape = view.shape
        if view.kind == "discrete":
            self.sizes = [int(view.space.n)]
        elif view.kind == "multi_discrete":
            self.sizes = [int(n) for n in view.space.nvec]
        else:
            self.dim = int(np.prod(view.shape))

    @property
    def net_out(self) -> int:
        """Width of the layer the policy network ends with."""
        return sum(self.sizes) if self.kind != "box" else self.dim

    def head(self, log_std_init: float) -> nn.Module:
        """What goes after the network's last layer: the log-std for a Box, else nothing."""
        return LogStd(self.dim, log_std_init) if self.kind == "box" else nn.Identity()

    def sample(self, out: torch.Tensor, mask: torch.Tensor | None, rng: np.random.Generator,
               explore: bool) -> torch.Tensor:
        """Actions ``[n, *shape]``: drawn with ``rng`` when exploring, else the most likely."""
        if self.kind == "box":
            mean, log_std = out.chunk(2, dim=1)
            if explore:
                noise = torch.from_numpy(rng.standard_normal(mean.shape, np.float32)).to(out.device)
                mean = mean + log_std.exp() * noise
            return mean.reshape(-1, *self.shape)
        picks = []
        for logits in self._logits(out, mask):
            if explore:
                gumbel = -np.log(-np.log(rng.random(logits.shape, np.float64).clip(1e-300, None)))
                logits = logits + torch.from_numpy(gumbel.astype(np.float32)).to(out.device)
            picks.append(logits.argmax(dim=1))
        return picks[0] if self.kind == "discrete" else torch.stack(picks, dim=1)

    def log_prob_entropy(self, out: torch.Tensor, mask: torch.Tensor | None,
                         action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities of ``action`` and entropies, each ``[n]``."""
        if self.kind == "box":
            mean, log_std = out.chunk(2, dim=1)
            a = action.reshape(mean.shape)
            logp = (-0.5 * ((a - mean) / log_std.exp()) ** 2 - log_std
                    - 0.5 * math.log(2 * math.pi)).sum(1)
            entropy = (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(1)
            return logp, entropy
        cols = action[:, None] if self.kind == "discrete" else action
        logp = out.new_zeros(out.shape[0])
        entropy = out.new_zeros(out.shape[0])
        for j, logits in enumerate(self._logits(out, mask)):
            log_probs = torch.log_softmax(logits, dim=1)
            logp = logp + log_probs.gather(1, cols[:, j:j + 1].long()).squeeze(1)
            entropy = entropy - (log_probs.exp() * log_probs).sum(1)
        return logp, entropy

    def _logits(self, out: torch.Tensor, mask: torch.Tensor | None) -> list[torch.Tensor]:
        if mask is not None:
            out = out.masked_fill(~mask, MASKED)
        return list(out.split(self.sizes, dim=1))


class LogStd(nn.Module):
    """Appends a learned, state-independent log-std to the Gaussian mean."""

    def __init__(self, dim: int, init: float):
        super().__init__()
        self.log_std = nn.Parameter(torch.full((dim,), float(init)))

    def forward(self, mean: torch.Tensor) -> torch.Tensor:
        return torch.cat([mean, self.log_std.expand_as(mean)], dim=1)

"""Action distributions over a network's output: categorical (masked), per-component
categorical for MultiDiscrete, diagonal Gaussian with a state-independent log-std, and their
product over the leaves of a Dict or Tuple action."""

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
    mean followed by the log-std for a Box. A composite (Dict or Tuple) action is a product of
    one distribution per leaf: the output holds the logits of every discrete leaf in order,
    then the Gaussian mean and log-std of every Box number; its log-probability and entropy
    are the sums over the leaves.
    """

    def __init__(self, view: ActionView):
        self.kind = view.kind
        self.shape = view.shape
        self.sizes: list[int] = []
        self.dim = 0  # Gaussian numbers
        if view.kind == "discrete":
            self.sizes = [int(view.space.n)]
        elif view.kind == "multi_discrete":
            self.sizes = [int(n) for n in view.space.nvec]
        elif view.kind == "box":
            self.dim = int(np.prod(view.shape))
        else:
            # Where each categorical's pick and each Gaussian number sit in an action row.
            picks: list[int] = []
            numbers: list[int] = []
            for leaf in view.leaves:
                cols = range(leaf.cols.start, leaf.cols.stop)
                (numbers if leaf.kind == "box" else picks).extend(cols)
                self.sizes += leaf.sizes
            self.dim = len(numbers)
            self.pick_cols = torch.tensor(picks, dtype=torch.long)
            self.number_cols = torch.tensor(numbers, dtype=torch.long)

    @property
    def net_out(self) -> int:
        """Width of the layer the policy network ends with."""
        return sum(self.sizes) + self.dim

    def head(self, log_std_init: float) -> nn.Module:
        """What goes after the network's last layer: the log-std where there are Box numbers,
        else nothing."""
        return LogStd(self.dim, log_std_init) if self.dim else nn.Identity()

    def sample(self, out: torch.Tensor, mask: torch.Tensor | None, rng: np.random.Generator,
               explore: bool) -> torch.Tensor:
        """Actions ``[n, *shape]``: drawn with ``rng`` when exploring, else the most likely."""
        if self.kind == "box":
            return self._gaussian_sample(out, rng, explore).reshape(-1, *self.shape)
        picks = self._categorical_sample(out, mask, rng, explore)
        if self.kind == "discrete":
            return picks[0]
        if self.kind == "multi_discrete":
            return torch.stack(picks, dim=1)
        row = out.new_zeros(out.shape[0], *self.shape)
        if picks:
            row[:, self.pick_cols.to(out.device)] = torch.stack(picks, dim=1).to(row.dtype)
        if self.dim:
            row[:, self.number_cols.to(out.device)] = self._gaussian_sample(
                out[:, sum(self.sizes):], rng, explore)
        return row

    def _categorical_sample(self, out: torch.Tensor, mask: torch.Tensor | None,
                            rng: np.random.Generator, explore: bool) -> list[torch.Tensor]:
        picks = []
        for logits in self._logits(out, mask):
            if explore:
                gumbel = -np.log(-np.log(rng.random(logits.shape, np.float64).clip(1e-300, None)))
                logits = logits + torch.from_numpy(gumbel.astype(np.float32)).to(out.device)
            picks.append(logits.argmax(dim=1))
        return picks

    def _gaussian_sample(self, out: torch.Tensor, rng: np.random.Generator,
                         explore: bool) -> torch.Tensor:
        """Draws ``[n, dim]`` from ``out`` (the mean, then the log-std)."""
        mean, log_std = out.chunk(2, dim=1)
        if explore:
            noise = torch.from_numpy(rng.standard_normal(mean.shape, np.float32)).to(out.device)
            mean = mean + log_std.exp() * noise
        return mean

    def log_prob_entropy(self, out: torch.Tensor, mask: torch.Tensor | None,
                         action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities of ``action`` and entropies, each ``[n]``."""
        if self.kind == "box":
            return _gaussian(out, action.reshape(out.shape[0], -1))
        if self.kind != "composite":
            cols = action[:, None] if self.kind == "discrete" else action
            return self._categorical(out, mask, cols)
        logp, entropy = self._categorical(out, mask, action[:, self.pick_cols.to(out.device)])
        if self.dim:
            box_logp, box_entropy = _gaussian(out[:, sum(self.sizes):],
                                              action[:, self.number_cols.to(out.device)])
            logp, entropy = logp + box_logp, entropy + box_entropy
        return logp, entropy

    def _categorical(self, out: torch.Tensor, mask: torch.Tensor | None,
                     cols: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logp = out.new_zeros(out.shape[0])
        entropy = out.new_zeros(out.shape[0])
        for j, logits in enumerate(self._logits(out, mask)):
            log_probs = torch.log_softmax(logits, dim=1)
            logp = logp + log_probs.gather(1, cols[:, j:j + 1].long()).squeeze(1)
            entropy = entropy - (log_probs.exp() * log_probs).sum(1)
        return logp, entropy

    def _logits(self, out: torch.Tensor, mask: torch.Tensor | None) -> list[torch.Tensor]:
        if self.dim:  # the Gaussian's part comes after the logits
            out = out[:, :sum(self.sizes)]
        if mask is not None:
            out = out.masked_fill(~mask, MASKED)
        return list(out.split(self.sizes, dim=1))


def _gaussian(out: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities of ``a`` (``[n, dim]``) under the diagonal Gaussian ``out`` (the
    mean, then the log-std) and its entropies, each ``[n]``."""
    mean, log_std = out.chunk(2, dim=1)
    logp = (-0.5 * ((a - mean) / log_std.exp()) ** 2 - log_std
            - 0.5 * math.log(2 * math.pi)).sum(1)
    entropy = (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(1)
    return logp, entropy


class LogStd(nn.Module):
    """Appends a learned, state-independent log-std to the Gaussian mean."""

    def __init__(self, dim: int, init: float):
        super().__init__()
        self.log_std = nn.Parameter(torch.full((dim,), float(init)))

    def forward(self, out: torch.Tensor) -> torch.Tensor:
        # ``out`` may hold logits before the mean (a composite action): only the mean's
        # width of log-stds is appended.
        return torch.cat([out, self.log_std.expand(*out.shape[:-1], -1)], dim=-1)

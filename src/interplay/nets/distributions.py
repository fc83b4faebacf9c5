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

    def act(self, out: torch.Tensor, mask: np.ndarray | None, rng: np.random.Generator,
            explore: bool) -> tuple[np.ndarray, np.ndarray]:
        """Actions ``[n, *shape]`` (float32 rows for a composite action) and their
        log-probabilities ``[n]``, both NumPy: drawn with ``rng`` when exploring, else the most
        likely.

        Acting happens on a few rows at a time, where NumPy's small-array calls cost a fraction
        of torch's: the network's output comes to the host once, and each categorical is drawn
        by inverting its cumulative probabilities with one uniform number per row.
        """
        out_ = (out if out.device.type == "cpu" else out.cpu()).detach().numpy()
        n = out_.shape[0]
        if self.kind == "box":
            action, logp = _gaussian_act(out_, rng, explore)
            return action.reshape(n, *self.shape), logp
        if self.kind == "discrete":
            return _categorical_act(out_, mask, rng, explore)
        logp = np.zeros(n, np.float32)
        picks = []
        at = 0
        for size in self.sizes:
            logits = out_[:, at:at + size]
            legal = None if mask is None else mask[:, at:at + size]
            pick, lp = _categorical_act(logits, legal, rng, explore)
            picks.append(pick)
            logp += lp
            at += size
        if self.kind == "multi_discrete":
            return np.stack(picks, axis=1), logp
        row = np.zeros((n, *self.shape), np.float32)
        if picks:
            row[:, self.pick_cols.numpy()] = np.stack(picks, axis=1)
        if self.dim:
            numbers, box_logp = _gaussian_act(out_[:, at:], rng, explore)
            row[:, self.number_cols.numpy()] = numbers
            logp += box_logp
        return row, logp

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

    def log_prob_any(self, out: torch.Tensor, mask: torch.Tensor | None,
                     allowed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The log-probability, ``[n]``, that each row's choices fall among ``allowed``
        (``[n, sum(sizes)]`` bool, one block per categorical dimension; a dimension with none
        allowed is left out), and which rows allow any."""
        logp = out.new_zeros(out.shape[0])
        allows = torch.zeros(out.shape[0], dtype=torch.bool, device=out.device)
        for logits, ok in zip(self._logits(out, mask), allowed.split(self.sizes, dim=1),
                              strict=True):
            has = ok.any(dim=1)
            picked = torch.logsumexp(torch.log_softmax(logits, dim=1).masked_fill(~ok, MASKED),
                                     dim=1)
            logp = logp + torch.where(has, picked, torch.zeros_like(picked))
            allows |= has
        return logp, allows

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


def _categorical_act(logits: np.ndarray, legal: np.ndarray | None, rng: np.random.Generator,
                     explore: bool) -> tuple[np.ndarray, np.ndarray]:
    """One pick per row of ``logits`` ``[n, K]`` (illegal choices never) and its log-probability.

    The work runs over the ``K`` choices with each call covering every row (choice-major):
    NumPy reduces a short last axis one row at a time, many times slower.
    """
    n, k = logits.shape
    z = np.ascontiguousarray(logits.T)
    if legal is not None:
        z[~legal.T] = MASKED
    z -= z.max(axis=0)
    weight = np.exp(z)
    if explore:
        # The first choice whose running weight passes a uniform point of the total.
        running = np.cumsum(weight, axis=0)
        total = running[-1]
        point = rng.random(n) * total
        pick = np.add.reduce(running[:-1] <= point, axis=0, dtype=np.int64)
        # ``point`` rounds up to the total only in rare rows: they take their last legal choice.
        past = (total <= point).nonzero()[0]
        if len(past):
            pick[past] = k - 1 - (weight[::-1, past] > 0).argmax(axis=0)
    else:
        total = weight.sum(axis=0)
        pick = z.argmax(axis=0)
    chosen = z.reshape(-1)[pick * n + np.arange(n)]
    return pick, chosen - np.log(total)


def _gaussian_act(out: np.ndarray, rng: np.random.Generator,
                  explore: bool) -> tuple[np.ndarray, np.ndarray]:
    """Draws ``[n, dim]`` from ``out`` (the mean, then the log-std) and their log-probabilities."""
    mean, log_std = np.split(out, 2, axis=1)
    if not explore:
        return mean, (-log_std - _HALF_LOG_2PI).sum(axis=1)
    noise = rng.standard_normal(mean.shape, np.float32)
    return mean + np.exp(log_std) * noise, (-0.5 * noise ** 2 - log_std - _HALF_LOG_2PI).sum(axis=1)


_HALF_LOG_2PI = np.float32(0.5 * math.log(2 * math.pi))


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

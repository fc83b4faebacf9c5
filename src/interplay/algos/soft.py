"""Soft actor-critic's parts: a policy's squashed-Gaussian or categorical draws, soft values
and targets, the entropy alpha holds a policy near, and one policy's networks."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from interplay.algos.actor_critic import ActorCriticNets, CriticMaker, gumbel_noise
from interplay.nets.build import ObsInput, network
from interplay.nets.distributions import MASKED
from interplay.run.mapping import PolicySpec
from interplay.seeding import rng_for

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
"""The actor's log-std is clamped to this range, so neither the density nor its gradient
blows up when a policy becomes near-deterministic or flat."""


@dataclass
class Draw:
    """Actions drawn from a policy, with what the losses need of the distribution."""

    action: torch.Tensor  # [..., act_dim] as the critics see it: squashed Box action, or one-hot
    log_prob: torch.Tensor  # Box: [...] log-density of the action; discrete: [..., n] of each action
    probs: torch.Tensor | None  # discrete: [..., n] the policy's probabilities; Box: None
    entropy: torch.Tensor  # [...] discrete: exact; Box: -log_prob, a one-draw estimate


def squashed_gaussian(mean: torch.Tensor, log_std: torch.Tensor,
                      noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``tanh(mean + std * noise)`` and its log-density, summed over the last axis.

    The density of a = tanh(u) is the Gaussian's at u divided by tanh's slope 1 - tanh(u)^2;
    log(1 - tanh(u)^2) is written as 2 (log 2 - u - softplus(-2u)), which stays finite where
    tanh rounds to +-1.
    """
    u = mean + log_std.exp() * noise
    gaussian = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    slope = (2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u))).sum(-1)
    return torch.tanh(u), gaussian - slope


def categorical(logits: torch.Tensor, mask: torch.Tensor | None,
                rng: np.random.Generator) -> Draw:
    """The categorical over ``logits`` with illegal actions at probability 0, and one-hot
    draws from it (Gumbel-max, so never an illegal action while any is legal)."""
    if mask is not None:
        logits = logits.masked_fill(~mask, MASKED)
    log_prob = torch.log_softmax(logits, dim=-1)
    probs = log_prob.exp()
    noise = torch.from_numpy(gumbel_noise(rng, tuple(logits.shape))).to(logits.device)
    pick = (logits.detach() + noise).argmax(dim=-1)
    action = nn.functional.one_hot(pick, logits.shape[-1]).to(probs.dtype)
    return Draw(action, log_prob, probs, -(probs * log_prob).sum(-1))


def soft_value(q: torch.Tensor, alpha: torch.Tensor | float, draw: Draw) -> torch.Tensor:
    """min_i Q_i - alpha * log pi at the drawn actions; for discrete actions its expectation
    under the policy. ``q`` is ``[critics, ..., 1]`` (Box) or ``[critics, ..., n]``."""
    low = q.min(dim=0).values
    if draw.probs is None:
        return low.squeeze(-1) - alpha * draw.log_prob
    return (draw.probs * (low - alpha * draw.log_prob)).sum(-1)


def soft_target(reward: torch.Tensor, bootstrap: torch.Tensor, gamma: float,
                value: torch.Tensor) -> torch.Tensor:
    """r + gamma * V(next), without the bootstrap where ``bootstrap`` is false."""
    return reward + gamma * torch.where(bootstrap, value, torch.zeros_like(value))


def weighted_mse(q: torch.Tensor, target: torch.Tensor,
                 weight: torch.Tensor | None) -> torch.Tensor:
    """The squared error of ``q`` against ``target``; with prioritised replay's importance
    weights (``[b]``), each row's error weighted by them."""
    each = (q - target).pow(2)
    if weight is None:
        return each.mean()
    return (each * weight.reshape(-1, *[1] * (each.dim() - 1))).mean()


def target_entropy(p: SACNets, mask: torch.Tensor | None) -> torch.Tensor | float:
    """The entropy alpha holds policy ``p`` near; for discrete actions, per row from the
    number of legal actions."""
    if not p.discrete:
        return -p.act_dim * p.entropy_scale
    if mask is None:
        return p.entropy_scale * math.log(p.act_dim)
    return p.entropy_scale * mask.sum(-1).clamp(min=1).float().log()


# -- networks -------------------------------------------------------------------------------------
class SACNets(ActorCriticNets):
    """One trained policy's stochastic actor, twin critics and their targets, entropy weight
    alpha, optimisers, and the RNG its learning draws with."""

    def __init__(self, spec: PolicySpec, s: Any, own: ObsInput, make_critic: CriticMaker,
                 critic_out: int, seed: int, name: str, device: str):
        super().__init__(spec, seed, name)
        scale = s.target_entropy_scale
        self.entropy_scale = (0.5 if self.discrete else 1.0) if scale is None else scale
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(rng_for(seed, name, "init", spec.id).integers(2**63)))
            width = self.act_dim if self.discrete else 2 * self.act_dim  # logits, or mean and log-std
            self.actor = network(own.model, [(own, 1)], width, 0.01, own.where).to(device)
            self.critics = nn.ModuleList(
                [make_critic(critic_out, 1.0) for _ in range(2)]).to(device)
        self.critic_targets = copy.deepcopy(self.critics).requires_grad_(False)
        self.log_alpha = torch.tensor(math.log(s.alpha), device=device, requires_grad=True)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=s.lr_actor)
        self.critic_optimizer = torch.optim.Adam(self.critics.parameters(), lr=s.lr_critic)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=s.lr_alpha)
        self.sample_rng = rng_for(seed, name, "sample", spec.id)

    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    def draw(self, obs: torch.Tensor, mask: torch.Tensor | None) -> Draw:
        """Actions for observations ``[..., obs_dim]``, reparameterised (Box) so that gradients
        reach the actor through them."""
        out = self.actor(obs)
        if self.discrete:
            return categorical(out, mask, self.sample_rng)
        mean, log_std = out.chunk(2, dim=-1)
        noise = torch.from_numpy(self.sample_rng.standard_normal(tuple(mean.shape), np.float32))
        action, log_prob = squashed_gaussian(mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX),
                                             noise.to(mean.device))
        return Draw(action, log_prob, None, -log_prob)

    def nets(self) -> dict[str, nn.Module | torch.optim.Optimizer]:
        return {"actor": self.actor, "critics": self.critics,
                "critic_targets": self.critic_targets, "actor_optimizer": self.actor_optimizer,
                "critic_optimizer": self.critic_optimizer,
                "alpha_optimizer": self.alpha_optimizer}

    def extra_state(self) -> dict[str, Any]:
        return {"log_alpha": self.log_alpha.detach().clone(),
                "sample_rng": self.sample_rng.bit_generator.state}

    def load_extra_state(self, saved: dict[str, Any]) -> None:
        with torch.no_grad():
            self.log_alpha.copy_(saved["log_alpha"])
        self.sample_rng.bit_generator.state = saved["sample_rng"]

"""QMIX's mixer with attention across agents (``algo.critic_model.type: attention``).

The agents' tokens (each one's observation, through its group's encoder) pass through a
transformer encoder over the agent axis, absent agents masked out
(:class:`~interplay.nets.attention.AgentAttention`). Each present agent's attended token gives
its own non-negative first-layer weights; the mean of the present agents' tokens gives the
first layer's bias and the second layer's non-negative weights and bias. So the team's value
is monotone in every agent's Q, as QMIX requires, and one mixer serves any number of agents,
whichever of them are present.
"""

from __future__ import annotations

import torch
from torch import nn

from interplay.config.critic_model import CriticModelSettings
from interplay.nets.attention import AgentAttention, TokenLayout


class AttentionMixer(nn.Module):
    """``q`` ``[b, agents]``, the joined observations ``[b, sum k * D]`` and the live flags
    ``[b, agents]`` -> the team's value ``[b]``."""

    def __init__(self, layout: TokenLayout, model: CriticModelSettings, hidden: int):
        super().__init__()
        e = model.embed
        self.attention = AgentAttention(layout, model, hidden, 1.0)
        self.bias1 = nn.Linear(e, hidden)
        self.weight2 = nn.Linear(e, hidden)
        self.bias2 = nn.Sequential(nn.Linear(e, e), nn.ReLU(), nn.Linear(e, 1))

    def forward(self, q: torch.Tensor, state: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
        att = self.attention
        tokens, present = att.tokens(torch.cat([state, live.to(state.dtype)], dim=-1))
        h = att.over_tokens(tokens, present)
        flags = present.unsqueeze(-1).to(h.dtype)
        w1 = att.head(h).abs() * flags  # [b, agents, hidden]
        pooled = h.sum(dim=1) / flags.sum(dim=1).clamp(min=1.0)
        hidden = nn.functional.elu(torch.bmm((q * present).unsqueeze(1), w1).squeeze(1)
                                   + self.bias1(pooled))
        return (hidden * self.weight2(pooled).abs()).sum(dim=1) + self.bias2(pooled).squeeze(1)

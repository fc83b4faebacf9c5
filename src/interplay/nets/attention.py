"""Attention across agents: a centralised critic (or a mixer's weights) that reads one token per
trained agent, whichever of them are present.

A centralised critic row is flat (see :mod:`interplay.algos.actor_critic` and
:mod:`interplay.algos.onpolicy.samples`): a lead (the row's own observation, action and slot),
every trained group's observations flattened over its agents, every trained group's actions
likewise (where the critic values actions), then one live flag per agent (1: present this step;
0: absent, dead, not yet joined, or not acting). :class:`TokenLayout` says where each piece
sits; :class:`AgentAttention` cuts the row into one token per agent (observation and action,
through its group's own linear encoder), runs a transformer encoder over the agent axis with
the absent agents as the key-padding mask, and gives one output per token through a head.
Without positions, permuting a group's agents permutes the outputs alike, and an absent agent's
token changes no present agent's output. A row with no agent present attends over all of its
tokens rather than none (a softmax over nothing is NaN) and its outputs are zeroed.
:class:`OwnTokenCritic` reads off the output at the row's own agent's token: a value per agent.
A step's rows carry one joint part (every agent's row the same tokens), so it attends once per
step and reads every agent's value from that one pass, not once per agent row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from interplay.config.critic_model import CriticModelSettings
from interplay.errors import ConfigError
from interplay.nets.attention_swap import OwnGroup, SwappedRows, own_token_layers, swapped_rows
from interplay.nets.build import ObsInput, check_network_fits, is_user
from interplay.nets.mlp import ACTIVATIONS, init_linear, mlp


@dataclass(frozen=True)
class TokenLayout:
    """Where a flat critic row keeps each trained agent's token."""

    groups: tuple[tuple[int, int, int], ...]
    """``(agents, observation width, action width)`` of each trained group, in the joint's
    order (action width 0: the critic reads no actions)."""
    lead: int = 0
    """Columns before the joint observations (the row's own observation, action and slot)."""
    own_group: int = 0
    """The group of the row's own agent."""
    slot_at: int | None = None
    """Where the row's one-hot slot starts (its group having several agents); None: the slot
    comes with the row, or the group has one agent."""

    @property
    def tokens(self) -> int:
        return sum(k for k, _, _ in self.groups)

    @property
    def width(self) -> int:
        """Columns of a whole row."""
        return self.lead + sum(k * (d + a) for k, d, a in self.groups) + self.tokens

    def offset(self, group: int) -> int:
        """The token index of ``group``'s first agent."""
        return sum(k for k, _, _ in self.groups[:group])

    def own(self) -> OwnGroup:
        """Where a row keeps its own group's pieces."""
        g = self.own_group
        k, d, a = self.groups[g]
        obs_at = self.lead + sum(n * w for n, w, _ in self.groups[:g])
        act_at = (self.lead + sum(n * w for n, w, _ in self.groups)
                  + sum(n * v for n, _, v in self.groups[:g]))
        return OwnGroup(k, d, a, self.lead, obs_at, act_at)


def attention_params(layout: TokenLayout, model: CriticModelSettings, out_dim: int) -> int:
    """Parameters of :class:`AgentAttention`, from the widths alone."""
    e = model.embed
    tokens = sum((d + a) * e + e for _, d, a in layout.groups)
    layer = 4 * e * e + 4 * e + 2 * (2 * e) * e + 3 * e + 4 * e  # attention, feed-forward, norms
    widths = [e, *model.hidden, out_dim]
    head = sum(a * b + b for a, b in zip(widths, widths[1:], strict=False))
    return tokens + model.layers * layer + 2 * e + head


class AgentAttention(nn.Module):
    """A transformer encoder over the agents' tokens: ``[..., agents, tokens' features]`` cut
    from a flat row by ``layout``, to ``[..., agents, out_dim]``."""

    def __init__(self, layout: TokenLayout, model: CriticModelSettings, out_dim: int,
                 out_gain: float):
        super().__init__()
        self.layout = layout
        e = model.embed
        act = ACTIVATIONS[model.activation]
        self.encoders = nn.ModuleList(
            nn.Sequential(init_linear(nn.Linear(d + a, e), 2 ** 0.5), act()) for _, d, a in layout.groups)
        layer = nn.TransformerEncoderLayer(e, model.heads, dim_feedforward=2 * e, dropout=0.0,
                                           activation=act(), batch_first=True, norm_first=True)
        self.attend = nn.TransformerEncoder(layer, model.layers, norm=nn.LayerNorm(e),
                                            enable_nested_tensor=False)
        self.head = mlp(e, out_dim, model, out_gain)

    def tokens(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A flat row ``[..., width]`` cut into tokens ``[..., agents, embed]`` and live flags
        ``[..., agents]`` (bool)."""
        lay = self.layout
        lead = x.shape[:-1]
        obs_at = lay.lead
        act_at = obs_at + sum(k * d for k, d, _ in lay.groups)
        live_at = act_at + sum(k * a for k, _, a in lay.groups)
        out = []
        for (k, d, a), enc in zip(lay.groups, self.encoders, strict=True):
            parts = [x[..., obs_at:obs_at + k * d].reshape(*lead, k, d)]
            if a:
                parts.append(x[..., act_at:act_at + k * a].reshape(*lead, k, a))
            out.append(enc(torch.cat(parts, dim=-1).float()))
            obs_at, act_at = obs_at + k * d, act_at + k * a
        live = x[..., live_at:live_at + lay.tokens] > 0.5
        return torch.cat(out, dim=-2), live

    def over_tokens(self, tokens: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
        """Encoded tokens ``[..., agents, embed]`` and their live flags -> the attended tokens,
        zero where the agent is absent."""
        lead, (k, e) = tokens.shape[:-2], tokens.shape[-2:]
        flat, present = tokens.reshape(-1, k, e), live.reshape(-1, k)
        nobody = ~present.any(dim=1, keepdim=True)
        y = self.attend(flat, src_key_padding_mask=~(present | nobody))
        return (y * present.unsqueeze(-1)).reshape(*lead, k, e)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """A flat row ``[..., width]`` -> ``[..., agents, out_dim]`` (zero for absent agents)."""
        tokens, live = self.tokens(x)
        y = self.head(self.over_tokens(tokens, live))
        return y * live.unsqueeze(-1)


class OwnTokenCritic(nn.Module):
    """A value (or Q) per row: :class:`AgentAttention`'s output at the row's own agent's token,
    found from the row's one-hot slot or the ``slot`` given with it."""

    def __init__(self, layout: TokenLayout, model: CriticModelSettings, out_dim: int,
                 out_gain: float):
        super().__init__()
        self.attention = AgentAttention(layout, model, out_dim, out_gain)
        self.layout = layout

    def forward(self, x: torch.Tensor, slot: torch.Tensor | None = None,
                share: torch.Tensor | None = None) -> torch.Tensor:
        """Rows ``[..., width]`` -> ``[..., out_dim]``.

        The transformer runs once per distinct joint part, not once per row: ``share`` (``[n]``
        for flat rows ``[n, width]``) gives rows whose joint parts are equal the same number (an
        on-policy row's table row); without it, rows ``[..., k, width]`` whose ``k`` joint parts
        are equal (a step's rows for each of its agents) share one pass, and rows that differ
        only in each one's own action are read as :mod:`interplay.nets.attention_swap` says."""
        lay = self.layout
        if slot is None:
            k = lay.groups[lay.own_group][0]
            slot = (x[..., lay.slot_at:lay.slot_at + k].argmax(dim=-1) if lay.slot_at is not None
                    else torch.zeros(x.shape[:-1], dtype=torch.long, device=x.device))
        at = slot.long() + lay.offset(lay.own_group)
        if share is not None and x.dim() == 2:
            return self._shared_rows(x, at, share)
        if x.dim() >= 3 and self._joint_parts_equal(x):
            y = self.attention(x[..., 0, :])  # [..., tokens, out_dim], once per step
            return y.gather(-2, at.unsqueeze(-1).expand(*at.shape, y.shape[-1]))
        if x.dim() >= 3:  # steps' rows along axis -2, any leading axes
            swapped = swapped_rows(lay.own(), x.reshape(-1, *x.shape[-2:]),
                                   slot.long().reshape(-1, x.shape[-2]))
            if swapped is not None:
                return self._swapped(swapped).reshape(*x.shape[:-1], -1)
        y = self.attention(x)
        at = at.reshape(*x.shape[:-1], 1, 1)
        return y.gather(-2, at.expand(*x.shape[:-1], 1, y.shape[-1])).squeeze(-2)

    def _joint_parts_equal(self, x: torch.Tensor) -> bool:
        """Whether the rows along ``x``'s second-to-last axis carry one joint part (tokens and
        live flags): an exact test, far cheaper than the transformer it saves."""
        joint = x[..., self.layout.lead:]
        return x.shape[-2] > 1 and bool((joint == joint[..., :1, :]).all())

    def _swapped(self, rows: SwappedRows) -> torch.Tensor:
        """Each row's output at its own agent's token, the transformer's last layer run there
        alone (see :mod:`interplay.nets.attention_swap`): ``[b, k, out_dim]``."""
        att, lay = self.attention, self.layout
        tokens, live = att.tokens(rows.base)
        at = lay.offset(lay.own_group) + torch.arange(rows.own.shape[1], device=tokens.device)
        own = att.encoders[lay.own_group](rows.own.float())
        present = live | ~live.any(dim=1, keepdim=True)  # nobody present: attend over all
        y = att.attend.norm(own_token_layers(att.attend.layers, tokens, own, at, present))
        flags = live[:, at, None]
        return att.head(y * flags) * flags

    def _shared_rows(self, x: torch.Tensor, at: torch.Tensor, share: torch.Tensor) -> torch.Tensor:
        """Flat rows ``[n, width]``: one pass per distinct ``share``, read at each row's token."""
        _, inverse = torch.unique(share, return_inverse=True)
        n = inverse.shape[0]
        first = torch.full((int(inverse.max()) + 1 if n else 0,), n, dtype=torch.long,
                           device=x.device)
        first.scatter_reduce_(0, inverse, torch.arange(n, device=x.device), reduce="amin")
        y = self.attention(x[first])  # [distinct, tokens, out_dim]
        return y[inverse, at]


def attention_critic(layout: TokenLayout, model: CriticModelSettings, groups: list[ObsInput],
                     out_dim: int, out_gain: float) -> OwnTokenCritic:
    """An :class:`OwnTokenCritic` for trained groups whose observations are ``groups`` (in
    ``layout``'s order), refused by name where it cannot be built or would not fit."""
    for g in groups:
        if g.layout is not None or is_user(g.model) or g.model.type == "cnn":
            raise ConfigError(
                f"algo.critic_model.type: attention reads each agent's observation as a flat "
                f"vector, but policy {g.pid!r}'s are encoded by a CNN or a network of your own "
                f"({g.where}.type: {g.model.type}); use critic_model.type: auto there")
    check_network_fits(attention_params(layout, model, out_dim), "algo.critic_model.embed",
                       model.embed, "lower algo.critic_model.embed or algo.critic_model.layers")
    return OwnTokenCritic(layout, model, out_dim, out_gain)

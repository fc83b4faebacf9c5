"""An attention critic's rows that differ only in each row's own agent's action (MADDPG's actor
loss: agent j's row holds the replayed joint actions with agent j's action from its actor now).

Those ``k`` rows hold ``k`` different token sets, so the transformer's outputs genuinely differ
between rows: with several layers every agent's token has attended to the swapped action by
the last layer, so each row needs its own pass through all but the last layer. What need not
be repeated is the last layer at the tokens nobody reads: it runs at each row's own token
alone, and with one layer the keys and values are projected once per step (the replayed
tokens and the swapped ones), each row's own key taking its place in that row's scores.
The result is the same function as :class:`~interplay.nets.attention.AgentAttention` read at
the own token, up to floating-point order.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F


class OwnGroup(NamedTuple):
    """Where a row keeps its own group's pieces."""

    agents: int
    obs: int  # an agent's observation width
    act: int  # an agent's action width
    lead: int  # columns before the joint part (the row's observation, action and slot)
    obs_at: int  # where the group's observations start in the joint part
    act_at: int  # where the group's actions start


class SwappedRows(NamedTuple):
    """Rows ``[b, k, width]`` of one step each, told apart by their own agent's action."""

    base: torch.Tensor  # [b, width]: the step's row with every agent's replayed action
    own: torch.Tensor  # [b, k, obs + act]: each row's own agent's token input, action swapped


def swapped_rows(g: OwnGroup, x: torch.Tensor, slot: torch.Tensor) -> SwappedRows | None:
    """``x`` as :class:`SwappedRows` when row j is slot j and its joint part is one shared
    joint part with only agent j's action replaced by the row's own action (checked exactly);
    None otherwise."""
    k, d, a, at = g.agents, g.obs, g.act, g.act_at
    if x.dim() != 3 or x.shape[1] != k or k < 2 or a == 0:
        return None
    if not torch.equal(slot, torch.arange(k, device=x.device).expand_as(slot)):
        return None
    own_act = x[..., d:d + a]  # the lead holds the row's observation, then its action
    acts = x[..., at:at + k * a].reshape(x.shape[0], k, k, a)  # [b, row, agent, a]
    agents = torch.arange(k, device=x.device)
    replayed = acts[:, (agents + 1) % k, agents]  # agent i's action from a row not its own
    eye = torch.eye(k, dtype=torch.bool, device=x.device)[None, :, :, None]
    if not torch.equal(acts, torch.where(eye, own_act[:, :, None], replayed[:, None])):
        return None
    rest = torch.cat([x[..., g.lead:at], x[..., at + k * a:]], dim=-1)
    if not bool((rest == rest[:, :1]).all()):
        return None
    base = torch.cat([x[:, 0, :at], replayed.reshape(x.shape[0], -1), x[:, 0, at + k * a:]], dim=-1)
    own_obs = x[:, 0, g.obs_at:g.obs_at + k * d].reshape(x.shape[0], k, d)
    return SwappedRows(base, torch.cat([own_obs, own_act], dim=-1))


def own_token_layers(layers: nn.ModuleList, tokens: torch.Tensor, own: torch.Tensor,
                     at: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """Pre-norm encoder ``layers`` over ``k`` token sets that are ``tokens`` ``[b, T, e]`` with
    set j's token ``at[j]`` replaced by ``own[:, j]``, read at that token: ``[b, k, e]``.
    ``present`` ``[b, T]``: the tokens attended to."""
    b, t, e = tokens.shape
    k = own.shape[1]
    states = tokens[:, None]  # [b, 1, T, e]: one token set shared by the rows
    if len(layers) > 1:
        swap = F.one_hot(at, t).bool()[None, :, :, None]  # [1, row, T, 1]
        flat = torch.where(swap, own[:, :, None], states).reshape(b * k, t, e)
        mask = ~present.repeat_interleave(k, dim=0)
        for layer in layers[:-1]:
            flat = layer(flat, src_key_padding_mask=mask)
        states = flat.reshape(b, k, t, e)
        own = states[:, torch.arange(k, device=own.device), at]
    return _last_layer(layers[-1], states, own, at, present)


def _last_layer(layer: nn.TransformerEncoderLayer, states: torch.Tensor, own: torch.Tensor,
                at: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
    """A pre-norm encoder layer at each row's own token alone: ``own`` ``[b, k, e]`` (row j's
    token ``at[j]``) attending over ``states`` ``[b, 1 or k, T, e]`` with row j's token
    ``at[j]`` being ``own[:, j]``."""
    attn = layer.self_attn
    heads, e = attn.num_heads, own.shape[-1]
    w_q, w_k, w_v = attn.in_proj_weight.chunk(3)
    b_q, b_k, b_v = attn.in_proj_bias.chunk(3)
    kv, mine = layer.norm1(states), layer.norm1(own)

    def split(z: torch.Tensor) -> torch.Tensor:  # [..., e] -> [..., heads, 1, e / heads]
        return z.reshape(*z.shape[:-1], heads, 1, e // heads)

    q = split(F.linear(mine, w_q, b_q))  # [b, k, h, 1, d]
    keys = split(F.linear(kv, w_k, b_k)).squeeze(-2).transpose(-2, -3)  # [b, 1|k, h, T, d]
    values = split(F.linear(kv, w_v, b_v)).squeeze(-2).transpose(-2, -3)
    scale = 1.0 / math.sqrt(e // heads)
    scores = (q @ keys.transpose(-1, -2)).squeeze(-2) * scale  # [b, k, h, T]
    own_score = (q.squeeze(-2) * split(F.linear(mine, w_k, b_k)).squeeze(-2)).sum(-1) * scale
    swap = F.one_hot(at, scores.shape[-1]).bool()[None, :, None, :]  # [1, k, 1, T]
    scores = torch.where(swap, own_score[..., None], scores)
    scores = scores.masked_fill(~present[:, None, None, :], float("-inf"))
    p = scores.softmax(dim=-1)
    mixed = (p.masked_fill(swap, 0.0)[..., None, :] @ values).squeeze(-2)  # [b, k, h, d]
    mixed = mixed + (p * swap).sum(-1, keepdim=True) * split(
        F.linear(mine, w_v, b_v)).squeeze(-2)
    y = own + attn.out_proj(mixed.reshape(*own.shape))
    return y + layer.linear2(layer.activation(layer.linear1(layer.norm2(y))))

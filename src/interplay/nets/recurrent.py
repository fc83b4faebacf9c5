"""Networks with memory: an encoder, a GRU or LSTM cell, and a head.

The state of one agent is one flat vector (an LSTM's ``h`` and ``c`` side by side), so
runners, storage and checkpoints keep it as a plain ``[..., state_size]`` array. It is reset
to zeros where an agent starts an episode (``first``), and left as it was where a cell of a
sequence holds no transition (``valid`` false: the agent did not act).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from torch import nn

from interplay.nets.mlp import ACTIVATIONS, NetSettings, mlp

Kind = Literal["gru", "lstm"]


class RecurrentNet(nn.Module):
    """``encoder`` → recurrent cell of ``size`` units → ``head``."""

    def __init__(self, encoder: nn.Module, in_features: int, kind: Kind, size: int,
                 head: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.kind = kind
        self.size = size
        self.cell: nn.GRUCell | nn.LSTMCell = (
            nn.GRUCell(in_features, size) if kind == "gru" else nn.LSTMCell(in_features, size))
        for name, p in self.cell.named_parameters():
            if "weight" in name:
                nn.init.orthogonal_(p)
            else:
                nn.init.zeros_(p)
        self.head = head

    @property
    def state_size(self) -> int:
        return self.size * (2 if self.kind == "lstm" else 1)

    def initial_state(self, n: int, device: str | torch.device = "cpu") -> torch.Tensor:
        return torch.zeros(n, self.state_size, device=device)

    def _cell(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if isinstance(self.cell, nn.LSTMCell):
            h, c = self.cell(x, (state[:, :self.size], state[:, self.size:]))
            return h, torch.cat([h, c], dim=1)
        h = self.cell(x, state)
        return h, h

    def step(self, x: torch.Tensor, state: torch.Tensor,
             first: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """One step for a batch ``[N, ...]``: the head's output and the new state."""
        if first is not None:
            state = state * (~first).unsqueeze(1).to(state.dtype)
        h, state = self._cell(self.encoder(x), state)
        return self.head(h), state

    def sequence(self, x: torch.Tensor, state: torch.Tensor, first: torch.Tensor,
                 valid: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Sequences ``x`` ``[L, B, ...]`` from ``state`` ``[B, S]``: the head's output
        ``[L, B, ...]``, and the states ``[L + 1, B, S]`` before each step (before any reset
        there) and after the last.

        The encoder and head run once over every cell; only the cell steps through time.
        """
        L, B = x.shape[:2]
        features = self.encoder(x.reshape(L * B, *x.shape[2:])).reshape(L, B, -1)
        keep = (~first).unsqueeze(2).to(state.dtype)
        outs, states = [], [state]
        for t in range(L):
            h, new = self._cell(features[t], state * keep[t])
            if valid is not None:
                new = torch.where(valid[t].unsqueeze(1), new, state)
            outs.append(h)
            state = new
            states.append(state)
        out = self.head(torch.stack(outs).reshape(L * B, -1))
        return out.reshape(L, B, *out.shape[1:]), torch.stack(states)

def recurrent_net(in_dim: int, out_dim: int, net: NetSettings, kind: Kind, size: int,
                  out_gain: float, after: nn.Module | None = None) -> RecurrentNet:
    """``net``'s hidden layers as the encoder, a ``kind`` cell of ``size`` units, and a linear
    head to ``out_dim`` (weights of ``out_gain``, then ``after`` if given)."""
    if net.hidden:
        encoder: nn.Module = nn.Sequential(
            mlp(in_dim, net.hidden[-1], NetSettings(hidden=net.hidden[:-1],
                                                    activation=net.activation), np.sqrt(2)),
            ACTIVATIONS[net.activation]())
        width = net.hidden[-1]
    else:
        encoder, width = nn.Identity(), in_dim
    head = nn.Linear(size, out_dim)
    nn.init.orthogonal_(head.weight, out_gain)
    nn.init.zeros_(head.bias)
    return RecurrentNet(encoder, width, kind, size,
                        head if after is None else nn.Sequential(head, after))

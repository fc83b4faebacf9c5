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

from interplay.config.model import ModelSettings
from interplay.errors import ConfigError
from interplay.nets.build import Part, check_network_fits, encoder, is_user, network, width
from interplay.nets.mlp import ACTIVATIONS

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

def recurrent_net(model: ModelSettings, parts: list[Part], out_dim: int, out_gain: float,
                  where: str, after: nn.Module | None = None) -> RecurrentNet:
    """``model``'s network with its ``recurrent`` cell between the hidden layers and a linear
    head to ``out_dim`` (weights of ``out_gain``, then ``after`` if given). The encoder is
    what ``model`` builds for ``parts`` (an image's CNN, a user module) and its hidden
    layers, the last of them feeding the cell."""
    assert model.recurrent != "none", "recurrent_net needs model.recurrent: gru or lstm"
    if model.head == "spatial":
        raise ConfigError(f"{where}.head: spatial with recurrent: {model.recurrent}: the "
                          "recurrent cell reads one vector, not the conv layers' map; use "
                          "head: dense")
    if model.mirror:
        raise ConfigError(f"{where}.mirror with recurrent: {model.recurrent}: a memory of "
                          "past frames has no mirror image to average over; set mirror: false")
    hidden = [] if is_user(model) else list(model.hidden)
    if hidden:
        body = network(model.model_copy(update={"hidden": hidden[:-1]}), parts, hidden[-1],
                       float(np.sqrt(2)), where)
        enc: nn.Module = nn.Sequential(body, ACTIVATIONS[model.activation]())
        features = hidden[-1]
    else:
        found = encoder(model, parts, where)
        enc, features = (nn.Identity(), width(parts)) if found is None else (found, found.out_features)
    gates = 3 if model.recurrent == "gru" else 4
    size = model.recurrent_size
    check_network_fits(gates * (features * size + size * size + 2 * size) + size * out_dim,
                       f"{where}.recurrent_size", size)
    head = nn.Linear(model.recurrent_size, out_dim)
    nn.init.orthogonal_(head.weight, out_gain)
    nn.init.zeros_(head.bias)
    return RecurrentNet(enc, features, model.recurrent, model.recurrent_size,
                        head if after is None else nn.Sequential(head, after))

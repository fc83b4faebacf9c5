"""Forward and backward time of per-agent networks (``algo.share_params: false``) as agents grow.

    python benchmarks/per_agent_nets.py [--agents 3 10 100 500] [--copies 32] [--reps 20]

One JSON line per agent count, layout and mode. ``stacked`` is interplay's per-agent module
(one batched matmul per layer over stacked weights, :mod:`interplay.nets.agents`); ``routed``
is how per-agent networks ran before it: one network per agent, rows picked out by slot id
(``nonzero`` per agent), one call per agent, a scatter back. Layouts: ``grid`` (every agent of
every copy, as the runner hands simultaneous moves and QMIX learns) and ``minibatch`` (the same
rows shuffled, as a PPO minibatch comes). Each timing is the median over ``--reps`` of one
forward pass, a squared-output loss and its backward pass, on one CPU thread; ``speedup`` is
routed over stacked.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from interplay.config.model import ModelSettings
from interplay.nets.agents import agent_nets
from interplay.nets.mlp import mlp

OBS, ACTIONS = 18, 5  # MPE spread's observation and actions
MODEL = ModelSettings()  # the default network: two hidden layers of 64, tanh


class Routed(nn.Module):
    """The per-agent networks interplay had before: rows routed to their agent's network."""

    def __init__(self, make: Callable[[], nn.Module], agents: int):
        super().__init__()
        self.nets = nn.ModuleList([make() for _ in range(agents)])

    def forward(self, x: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
        parts = [(slot == j).nonzero().squeeze(1) for j in range(len(self.nets))]
        outs = [net(x[rows]) for net, rows in zip(self.nets, parts, strict=True)]
        out = outs[0].new_empty((x.shape[0], *outs[0].shape[1:]))
        for rows, y in zip(parts, outs, strict=True):
            out[rows] = y
        return out


def timed(net: nn.Module, x: torch.Tensor, slot: torch.Tensor, reps: int) -> float:
    """Median seconds of one forward and backward pass."""
    times = []
    for _ in range(reps + 2):
        net.zero_grad(set_to_none=True)
        start = time.perf_counter()
        (net(x, slot) ** 2).mean().backward()
        times.append(time.perf_counter() - start)
    return statistics.median(times[2:])  # the first passes warm up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[3, 10, 100, 500])
    parser.add_argument("--copies", type=int, default=32)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)

    def make() -> nn.Module:
        return mlp(OBS, ACTIONS, MODEL, 0.01)

    for k in args.agents:
        torch.manual_seed(0)
        nets = {"routed": Routed(make, k), "stacked": agent_nets(make, k, shared=False)}
        rows = args.copies * k
        x = torch.randn(rows, OBS)
        grid = torch.arange(k).repeat(args.copies)
        order = torch.randperm(rows)
        for layout, (xs, slot) in {"grid": (x, grid), "minibatch": (x[order], grid[order])}.items():
            ms = {mode: 1e3 * timed(net, xs, slot, args.reps) for mode, net in nets.items()}
            for mode, t in ms.items():
                print(json.dumps({"benchmark": "per_agent_nets", "agents": k,
                                  "copies": args.copies, "rows": rows, "layout": layout,
                                  "mode": mode, "forward_backward_ms": round(t, 3),
                                  "speedup": round(ms["routed"] / ms["stacked"], 2),
                                  "hidden": MODEL.hidden, "threads": 1}), flush=True)


if __name__ == "__main__":
    main()

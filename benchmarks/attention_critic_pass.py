"""The attention critic's forward and backward pass on one batch of joint rows, timed.

    python benchmarks/attention_critic_pass.py [--batch 1024] [--agents 3 20] [--repeats 20]

Builds :class:`~interplay.nets.attention.OwnTokenCritic` as ``configs/mappo_attention_spread.yaml``
sets it (embed 32, 4 heads, 1 layer, head [64]) over one group of ``k`` agents, each with an
observation of 18 and a one-hot action of 5, and times forward + backward on a ``[batch, k]``
batch of rows: each step's ``k`` rows, one per agent, carry the step's joint observations and
actions (as MADDPG's critic and target rows do). Prints one JSON line per ``k``: milliseconds
per pass (median of ``--repeats``) and rows per second.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from interplay.config.critic_model import CriticModelSettings
from interplay.nets.attention import OwnTokenCritic, TokenLayout

OBS, ACT = 18, 5


def rows(batch: int, k: int) -> torch.Tensor:
    """``[batch, k, width]``: row j holds agent j's observation, action and slot, then the
    step's joint observations, joint actions and live flags."""
    obs, act = torch.randn(batch, k, OBS), torch.randn(batch, k, ACT)
    joint = torch.cat([obs.reshape(batch, -1), act.reshape(batch, -1), torch.ones(batch, k)],
                      dim=1)
    slot = torch.eye(k).expand(batch, k, k)
    return torch.cat([obs, act, slot, joint[:, None].expand(batch, k, -1)], dim=2)


def time_pass(batch: int, k: int, repeats: int) -> float:
    model = CriticModelSettings(type="attention", embed=32, heads=4, layers=1, hidden=[64],
                                activation="relu")
    layout = TokenLayout(((k, OBS, ACT),), lead=OBS + ACT + k, slot_at=OBS + ACT)
    critic = OwnTokenCritic(layout, model, 1, 1.0)
    x = rows(batch, k)
    times = []
    for i in range(repeats + 3):  # three to warm up
        start = time.perf_counter()
        critic.zero_grad(set_to_none=True)
        critic(x).square().mean().backward()
        if i >= 3:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--agents", type=int, nargs="+", default=[3, 20])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    for k in args.agents:
        s = time_pass(args.batch, k, args.repeats)
        print(json.dumps({"batch": args.batch, "agents": k, "ms_per_pass": round(1e3 * s, 2),
                          "rows_per_s": round(args.batch * k / s)}))


if __name__ == "__main__":
    main()

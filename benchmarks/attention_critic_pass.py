"""The attention critic's forward and backward pass on one batch of joint rows, timed.

    python benchmarks/attention_critic_pass.py [--batch 1024] [--agents 3 20] [--repeats 20]

Builds :class:`~interplay.nets.attention.OwnTokenCritic` as ``configs/mappo_attention_spread.yaml``
sets it (embed 32, 4 heads, 1 layer, head [64]) over one group of ``k`` agents, each with an
observation of 18 and a one-hot action of 5, and times forward + backward on a ``[batch, k]``
batch of rows: each step's ``k`` rows, one per agent, carry the step's joint observations and
actions (``shared``: as MAPPO's rows and MADDPG's critic and target rows do), or the joint
actions with each row's own agent's action swapped in (``swapped``: MADDPG's actor loss). Prints
one JSON line per ``k`` and kind: milliseconds per pass (median of ``--repeats``) and rows per
second.
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


def rows(batch: int, k: int, swapped: bool) -> torch.Tensor:
    """``[batch, k, width]``: row j holds agent j's observation, action and slot, then the
    step's joint observations, joint actions (agent j's from ``own`` where ``swapped``) and
    live flags."""
    obs, act = torch.randn(batch, k, OBS), torch.randn(batch, k, ACT)
    own = torch.randn(batch, k, ACT) if swapped else act
    eye = torch.eye(k)[None, :, :, None]
    acts = (eye * own[:, None] + (1 - eye) * act[:, None]).reshape(batch, k, -1)
    joint_obs = obs.reshape(batch, 1, -1).expand(batch, k, -1)
    slot = torch.eye(k).expand(batch, k, k)
    return torch.cat([obs, own, slot, joint_obs, acts, torch.ones(batch, k, k)], dim=2)


def time_pass(batch: int, k: int, swapped: bool, repeats: int) -> float:
    model = CriticModelSettings(type="attention", embed=32, heads=4, layers=1, hidden=[64],
                                activation="relu")
    layout = TokenLayout(((k, OBS, ACT),), lead=OBS + ACT + k, slot_at=OBS + ACT)
    critic = OwnTokenCritic(layout, model, 1, 1.0)
    x = rows(batch, k, swapped)
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
        for kind in ("shared", "swapped"):
            s = time_pass(args.batch, k, kind == "swapped", args.repeats)
            print(json.dumps({"batch": args.batch, "agents": k, "rows": kind,
                              "ms_per_pass": round(1e3 * s, 2),
                              "rows_per_s": round(args.batch * k / s)}))


if __name__ == "__main__":
    main()

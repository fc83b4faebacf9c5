"""Dict observations read entry by entry (a CNN on the image, an MLP on the vector) against the
same observations flattened into one MLP, and random play; and what the stored observations
take, image bytes kept as bytes against everything as float32.

    python benchmarks/multi_input.py [--steps 20000] [--seed 0] [--buffer-size 100000]

Trains configs/ippo_multi_input.yaml (IPPO on interplay.envs.color_key: a 42x42 RGB frame and
a one-hot key, paid for naming (colour + key) % 3) twice on the same budget and seed, once as
it is and once with ``algo.model.type: mlp``; random play is scored over ten times as many episodes.
One JSON line per variant (``test_return``: the last test phase's mean episode return over
all agents), then one line of storage figures: the bytes per stored observation, a rollout
of the preset's shape and a replay buffer of ``--buffer-size`` transitions (observation and
next observation), as kept (uint8 frame, float32 key) and as float32 flattening would keep them.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from gymnasium import spaces

from interplay import train
from interplay.config.loading import load
from interplay.data.replay import ReplayBuffer
from interplay.envs.spaces import obs_view
from interplay.envs.toy.color_key import ColorKey

PRESET = Path(__file__).resolve().parent.parent / "configs" / "ippo_multi_input.yaml"
QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


def trained(steps: int, seed: int, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the preset's encoders, unused by type: mlp
        cfg = load([PRESET], [*QUIET, f"train.steps={steps}", f"train.seed={seed}",
                              f"train.test_frequency={steps}", "train.device=cpu", *extra])
        start = time.perf_counter()
        result = train(cfg, Path(tmp) / "run")
        test = [r for r in result.rows if r["phase"] == "test"][-1]
        return {"test_return": test["episode_return_mean"], "env_steps": result.env_steps,
                "wall_s": round(time.perf_counter() - start, 1),
                "test_episodes": cfg.train.test_episodes}


def random_return(episodes: int, seed: int) -> float:
    env = ColorKey()
    rng = np.random.default_rng(seed)
    totals = []
    for ep in range(episodes):
        env.reset(seed=seed + ep)
        total = 0.0
        while env.agents:
            _, rewards, *_ = env.step({a: int(rng.integers(env.n_colors)) for a in env.agents})
            total += sum(rewards.values())
        totals.append(total)
    return float(np.mean(totals))


def storage(buffer_size: int) -> dict:
    env = ColorKey()
    space = env.observation_space(env.possible_agents[0])
    view = obs_view(space, "eye_0")
    kept = view.dim * np.dtype(view.dtype).itemsize
    flat = spaces.flatdim(space) * 4
    cfg = load([PRESET], [])
    rollout_rows = cfg.algo.rollout * cfg.env.num_envs * len(env.possible_agents)
    replay = ReplayBuffer(buffer_size, view.dim, obs_dtype=view.dtype)
    replay_kept = replay.obs.nbytes + replay.next_obs.nbytes
    return {"benchmark": "multi_input", "figure": "storage", "obs_dtype": str(np.dtype(view.dtype)),
            "obs_bytes": kept, "obs_bytes_float32": flat,
            "rollout_obs_bytes": 2 * rollout_rows * kept,
            "rollout_obs_bytes_float32": 2 * rollout_rows * flat,
            "replay_transitions": buffer_size, "replay_obs_bytes": replay_kept,
            "replay_obs_bytes_float32": 2 * buffer_size * flat,
            "ratio": round(flat / kept, 2)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--buffer-size", type=int, default=100_000)
    args = p.parse_args()
    runs = {"per_entry": [], "flat_mlp": ["algo.model.type=mlp"]}
    episodes = 0
    for name, extra in runs.items():
        got = trained(args.steps, args.seed, extra)
        episodes = got["test_episodes"]
        print(json.dumps({"benchmark": "multi_input", "variant": name, "seed": args.seed,
                          "steps": args.steps, **got}), flush=True)
    # random play's mean over ten times the test episodes: the figure it is compared with
    print(json.dumps({"benchmark": "multi_input", "variant": "random", "seed": args.seed,
                      "test_return": random_return(10 * episodes, args.seed),
                      "episodes": 10 * episodes}), flush=True)
    print(json.dumps(storage(args.buffer_size)), flush=True)


if __name__ == "__main__":
    main()

"""Peak memory and checkpoint size of DQN and IPPO on an image env, next to what its frames need.

    python benchmarks/image_memory.py [--env interplay.envs.pixels] [--steps 5000]
                                      [--buffer-size 100000]

Each run trains in a fresh process (so its peak resident memory is its own) on 42×42 RGB
frames (uint8). One JSON line per algorithm: the process's peak RSS, what a process that only
imports interplay and torch peaks at (the floor), the checkpoint's ``state.pt`` size, and the
bytes the frames it holds take as uint8 (``frames_bytes``: observation and next observation
of every stored transition; the float32 figure is four times that). A Dict observation with
image entries (``--env interplay.envs.color_key``) counts its whole stored row: the image
bytes and four bytes per value of the other entries.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from interplay.envs.registry import env_factory

CHILD = r"""
import json, resource, sys
from pathlib import Path

import numpy as np

from interplay.envs.registry import env_factory
from interplay import config, train
spec = json.loads(sys.argv[1])
if spec["algo"]:
    result = train(config.validate(spec["cfg"]), spec["run_dir"])
    state = result.checkpoint / "state.pt"
    out = {"env_steps": result.env_steps, "state_bytes": state.stat().st_size}
else:
    out = {}
out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(out))
"""


def child(spec: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def observation_bytes(env_id: str) -> int:
    """What one stored observation takes: a frame's bytes, or for a Dict with image entries its
    row (image bytes, then four bytes per float of the other entries)."""
    from interplay.envs.spaces import obs_view

    env = env_factory(env_id, {}, "parallel")()
    agent = env.possible_agents[0]
    view = obs_view(env.observation_space(agent), agent)
    return view.dim * int(np.dtype(view.dtype).itemsize)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--env", default="interplay.envs.pixels")
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--buffer-size", type=int, default=100_000)
    p.add_argument("--num-envs", type=int, default=4)
    args = p.parse_args()
    floor = child({"algo": None})["peak_rss_bytes"]
    algos = {
        "dqn": {"name": "dqn", "buffer_size": args.buffer_size, "learning_starts": 500,
                "batch_size": 32, "train_every": 4},
        "ippo": {"name": "ippo", "rollout": 64, "epochs": 2, "minibatches": 4},
    }
    for name, algo in algos.items():
        with tempfile.TemporaryDirectory() as tmp:
            cfg = {"env": {"id": args.env, "num_envs": args.num_envs}, "algo": algo,
                   "train": {"steps": args.steps, "seed": 0, "device": "cpu"},
                   "log": {"console": False, "tensorboard": False, "curve": False,
                           "every": args.steps}}
            got = child({"algo": name, "cfg": cfg, "run_dir": str(Path(tmp) / "run")})
        frame = observation_bytes(args.env)
        agents = len(env_factory(args.env, {}, "parallel")().possible_agents)
        stored = min(args.buffer_size, got["env_steps"] * agents) if name == "dqn" else 0
        print(json.dumps({
            "benchmark": "image_memory", "env": args.env, "algo": name,
            "env_steps": got["env_steps"], "num_envs": args.num_envs,
            "frame_bytes": frame, "stored_transitions": stored,
            "frames_bytes": stored * frame * 2,
            "peak_rss_bytes": got["peak_rss_bytes"], "floor_rss_bytes": floor,
            "rss_over_floor_bytes": got["peak_rss_bytes"] - floor,
            "checkpoint_state_bytes": got["state_bytes"],
        }), flush=True)


if __name__ == "__main__":
    main()

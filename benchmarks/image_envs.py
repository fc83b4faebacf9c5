"""IPPO on image envs: the CNN default next to the flattened MLP, against the bare env.

    python benchmarks/image_envs.py [--steps-pistonball 1500] [--steps-pixels 6000]
                                    [--full-size] [--pistonball-learning 30000]

For each env (``pistonball_v6`` with its frames grayscaled and resized, 3 frames stacked; the
built-in ``ColorMatch`` of ``interplay.envs.pixels``) and each network (``cnn``: the default
for images; ``mlp``: the frames flattened into the MLP), one JSON line: IPPO's training
env-steps/s divided by the bare random loop of the same env (a plain PettingZoo loop, in the
same process kind), the training process's peak resident memory, the checkpoint's
``state.pt`` size, and the test phase's greedy return next to a random policy's. Each run trains
in a fresh process, so its peak memory is its own.

``--full-size`` adds pistonball with its 457x120 RGB frames flattened into the MLP, unresized
(the setup before CNNs; slow and large). ``--pistonball-learning N`` adds a longer CNN run of
N env steps whose test return is compared with the random policy's (a learning check too long
for the test suite).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from interplay import config, train
spec = json.loads(sys.argv[1])
t = time.perf_counter()
result = train(config.validate(spec["cfg"]), spec["run_dir"])
wall = time.perf_counter() - t
rows = [r for r in result.rows if r["phase"] == "test"]
print(json.dumps({
    "env_steps": result.env_steps, "wall_s": wall,
    "state_bytes": (result.checkpoint / "state.pt").stat().st_size,
    "test_return": rows[-1]["episode_return_mean"] if rows else None,
    "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

RANDOM = r"""
import json, sys, time
import numpy as np
from interplay.envs.registry import env_factory
spec = json.loads(sys.argv[1])
env = env_factory(spec["id"], spec["kwargs"], "parallel")()
env.reset(seed=0)
for a in env.possible_agents:
    env.action_space(a).seed(0)
steps, t, returns, total = 0, time.perf_counter(), [], 0.0
while steps < spec["steps"] or not returns:
    if not env.agents:
        returns.append(total)
        total = 0.0
        env.reset()
    _, rew, *_ = env.step({a: env.action_space(a).sample() for a in env.agents})
    total += sum(rew.values())
    steps += 1
print(json.dumps({"env_steps_per_s": steps / (time.perf_counter() - t),
                  "random_return": float(np.mean(returns))}))
"""

PISTONBALL = "pettingzoo.butterfly.pistonball_v6"
PIXELS = "interplay.envs.pixels"


def run(code: str, spec: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", code, json.dumps(spec)], capture_output=True,
                          text=True)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def config_for(env: str, kwargs: dict, model: dict, policies: dict, steps: int,
               num_envs: int, algo: dict) -> dict:
    return {
        "env": {"id": env, "kwargs": kwargs, "num_envs": num_envs},
        "algo": {"name": "ippo", **algo, "model": model},
        "policies": policies,
        "train": {"steps": steps, "seed": 0, "device": "cpu", "test_frequency": steps,
                  "test_episodes": 2, "batch_mode": "truncate_episodes"},
        "log": {"console": False, "tensorboard": False, "curve": False, "every": steps},
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps-pistonball", type=int, default=1500)
    p.add_argument("--steps-pixels", type=int, default=6000)
    p.add_argument("--full-size", action="store_true")
    p.add_argument("--pistonball-learning", type=int, default=0)
    args = p.parse_args()
    # without a render mode pistonball's frames never show the ball or the pistons moving
    piston_kw = {"max_cycles": 125, "render_mode": "rgb_array"}
    prep = {"resize": [64, 64], "grayscale": True}
    stack = {"piston": {"stack_size": 3}}
    piston_algo = {"rollout": 64, "epochs": 4, "minibatches": 4, "lr": 3e-4}
    pixel_algo = {"rollout": 32, "epochs": 4, "minibatches": 2, "lr": 3e-4}
    runs = [
        ("pistonball_v6 64x64 gray x3", PISTONBALL, piston_kw, "cnn", prep, stack, piston_algo,
         args.steps_pistonball, 2),
        ("pistonball_v6 64x64 gray x3", PISTONBALL, piston_kw, "mlp", prep, stack, piston_algo,
         args.steps_pistonball, 2),
        ("color_match 42x42 rgb", PIXELS, {}, "cnn", {}, {}, pixel_algo, args.steps_pixels, 4),
        ("color_match 42x42 rgb", PIXELS, {}, "mlp", {}, {}, pixel_algo, args.steps_pixels, 4),
    ]
    if args.full_size:
        runs.append(("pistonball_v6 457x120 rgb", PISTONBALL, piston_kw, "mlp", {}, {},
                     piston_algo, args.steps_pistonball, 2))
    if args.pistonball_learning:
        runs.append(("pistonball_v6 64x64 gray x3", PISTONBALL, piston_kw, "cnn", prep, stack,
                     piston_algo, args.pistonball_learning, 2))
    bare: dict[str, dict] = {}
    for label, env, kwargs, network, model, policies, algo, steps, num_envs in runs:
        if env not in bare:
            bare[env] = run(RANDOM, {"id": env, "kwargs": kwargs, "steps": 600})
        cfg = config_for(env, kwargs, {"type": network, **model}, policies, steps, num_envs,
                         algo)
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            got = run(CHILD, {"cfg": cfg, "run_dir": str(Path(tmp) / "run")})
            took = time.perf_counter() - started
        rate = got["env_steps"] / got["wall_s"]
        print(json.dumps({
            "benchmark": "image_envs", "env": label, "network": network, "algo": "ippo",
            "num_envs": num_envs, "env_steps": got["env_steps"],
            "train_env_steps_per_s": round(rate, 1),
            "random_env_steps_per_s": round(bare[env]["env_steps_per_s"], 1),
            "ratio": round(rate / bare[env]["env_steps_per_s"], 3),
            "peak_rss_bytes": got["peak_rss_bytes"],
            "checkpoint_state_bytes": got["state_bytes"],
            "test_return": got["test_return"],
            "random_return": round(bare[env]["random_return"], 3),
            "process_s": round(took, 1),
        }), flush=True)


if __name__ == "__main__":
    main()

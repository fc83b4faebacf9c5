"""Env-steps/s of the async vector env with 1, 2, 4 and 8 copies against one in-process env.

mpe2 simple_spread_v3 with random actions. Async runs use one worker for one copy and two
workers otherwise. Prints one JSON line; each figure is the median over rounds, interleaved so
that background load hits every configuration alike; ``speedup`` is over the one in-process
env (a ``SyncVecEnv`` of one copy). Meant for a quiet machine: other work on the same cores
lowers the async figures most.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import numpy as np

from interplay.envs.async_vec import AsyncVecEnv
from interplay.envs.registry import env_factory
from interplay.envs.vector import SyncVecEnv

SECONDS = 1.0  # per measurement
ROUNDS = 3
COPIES = (1, 2, 4, 8)
MAX_STEPS = 25
SEED = 0


def measure(env, rng: np.random.Generator) -> float:
    step = env.reset(SEED)
    actions = [{a: rng.integers(0, 5, size=env.num_envs) for a in env.agents} for _ in range(64)]
    for i in range(20):  # warm up
        step = env.step(actions[i % 64])
    steps, i = 0, 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < SECONDS:
        steps += int(np.count_nonzero(step.acting.any(axis=1)))
        step = env.step(actions[i % 64])
        i += 1
    return steps / elapsed


def main() -> None:
    make = env_factory("mpe2.simple_spread_v3")
    rng = np.random.default_rng(SEED)
    envs = {"sync_1": SyncVecEnv(make, 1, MAX_STEPS)}
    for n in COPIES:
        envs[f"async_{n}"] = AsyncVecEnv(make, n, MAX_STEPS, num_workers=min(n, 2))
    try:
        rates: dict[str, list[float]] = {name: [] for name in envs}
        for _ in range(ROUNDS):
            for name, env in envs.items():
                rates[name].append(measure(env, rng))
    finally:
        for env in envs.values():
            env.close()
    median = {name: statistics.median(r) for name, r in rates.items()}
    base = median["sync_1"]
    print(json.dumps({
        "benchmark": "async_scaling", "env": "mpe2.simple_spread_v3", "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2), "seconds": SECONDS, "rounds": ROUNDS,
        "one_env_steps_per_s": round(base, 1),
        **{f"async_{n}_steps_per_s": round(median[f"async_{n}"], 1) for n in COPIES},
        **{f"async_{n}_speedup": round(median[f"async_{n}"] / base, 3) for n in COPIES},
    }))


if __name__ == "__main__":
    main()

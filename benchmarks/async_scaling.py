"""Env-steps/s of the async vector env with 1, 2, 4, 8 and 16 copies against one in-process env.

mpe2 simple_spread_v3 with random actions. Async runs use one worker for one copy and two
workers otherwise. Prints one JSON line; each figure is the median over rounds, interleaved so
that background load hits every configuration alike; ``speedup`` is over the one in-process
env (a ``SyncVecEnv`` of one copy). Meant for a quiet machine: other work on the same cores
lowers the async figures most. ``parallel_ceiling`` says how much room there was: two
independent processes, each stepping one in-process env at the same time, over one alone
(2.0 on two idle cores).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from interplay.envs.async_vec import AsyncVecEnv
from interplay.envs.registry import env_factory
from interplay.envs.vector import SyncVecEnv

SECONDS = 1.0  # per measurement
ROUNDS = 5
COPIES = (1, 2, 4, 8, 16)
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


def solo_rate(start_at: float) -> float:
    env = SyncVecEnv(env_factory("mpe2.simple_spread_v3"), 1, MAX_STEPS)
    time.sleep(max(0.0, start_at - time.time()))
    return measure(env, np.random.default_rng(SEED))


def two_at_once(pool: ProcessPoolExecutor) -> float:
    start_at = time.time() + 0.5
    return sum(f.result() for f in [pool.submit(solo_rate, start_at) for _ in range(2)])


def main() -> None:
    make = env_factory("mpe2.simple_spread_v3")
    rng = np.random.default_rng(SEED)
    pool = ProcessPoolExecutor(2, mp_context=mp.get_context("forkserver"))
    envs = {"sync_1": SyncVecEnv(make, 1, MAX_STEPS)}
    for n in COPIES:
        envs[f"async_{n}"] = AsyncVecEnv(make, n, MAX_STEPS, num_workers=min(n, 2))
    try:
        rates: dict[str, list[float]] = {name: [] for name in [*envs, "two_at_once"]}
        for _ in range(ROUNDS):
            for name, env in envs.items():
                rates[name].append(measure(env, rng))
            rates["two_at_once"].append(two_at_once(pool))
    finally:
        for env in envs.values():
            env.close()
        pool.shutdown()
    median = {name: statistics.median(r) for name, r in rates.items()}
    base = median["sync_1"]
    print(json.dumps({
        "benchmark": "async_scaling", "env": "mpe2.simple_spread_v3", "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2), "seconds": SECONDS, "rounds": ROUNDS,
        "one_env_steps_per_s": round(base, 1),
        "parallel_ceiling": round(median["two_at_once"] / base, 3),
        **{f"async_{n}_steps_per_s": round(median[f"async_{n}"], 1) for n in COPIES},
        **{f"async_{n}_speedup": round(median[f"async_{n}"] / base, 3) for n in COPIES},
    }))


if __name__ == "__main__":
    main()

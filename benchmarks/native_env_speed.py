"""Random-action env steps per second: native ``spread`` (4096 copies) against mpe2.

An env step is one step of one copy. Prints one JSON line.
"""

from __future__ import annotations

import json
import time

import numpy as np

NUM_ENVS = 4096
SECONDS = 3.0


def native_speed(seconds: float) -> float:
    from interplay.envs.native import Spread

    env = Spread(num_envs=NUM_ENVS)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    agents = env.agents
    for _ in range(5):  # warm up
        env.step({a: rng.integers(5, size=NUM_ENVS) for a in agents})
    steps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        env.step({a: rng.integers(5, size=NUM_ENVS) for a in agents})
        steps += NUM_ENVS
    env.close()
    return steps / elapsed


def mpe2_speed(seconds: float) -> float:
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env()
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    steps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        env.step({a: int(rng.integers(5)) for a in env.agents})
        steps += 1
        if not env.agents:
            env.reset()
    env.close()
    return steps / elapsed


def main() -> None:
    native = native_speed(SECONDS)
    reference = mpe2_speed(SECONDS)
    print(json.dumps({
        "benchmark": "native_env_speed",
        "native_steps_per_s": round(native),
        "mpe2_steps_per_s": round(reference),
        "ratio": round(native / reference, 1),
    }))


if __name__ == "__main__":
    main()

"""Runner env-steps/s over a bare PettingZoo loop on mpe2 simple_spread_v3, one env, random actions.

Prints one JSON line. All loops run in this process, on the same seeds, interleaved over
several rounds; the figures are ratios of medians (1.0 = the runner costs nothing). Two bare
loops: the one PettingZoo's docs write (``env.action_space(agent).sample()`` per agent), and a
leaner one drawing actions from a NumPy generator.
"""

from __future__ import annotations

import json
import statistics
import time

import numpy as np
from mpe2 import simple_spread_v3

from interplay.actors import RandomActor
from interplay.algos.base import rng_for
from interplay.config import validate
from interplay.runner import Runner
from interplay.trainer import make_specs, make_vec_env

STEPS = 4000
ROUNDS = 7
SEED = 0


def bare_loop(docs_style: bool) -> float:
    env = simple_spread_v3.parallel_env()
    env.reset(seed=SEED)
    rng = np.random.default_rng(SEED)
    for a in env.possible_agents:
        env.action_space(a).seed(SEED)
    start = time.perf_counter()
    for _ in range(STEPS):
        if docs_style:
            env.step({a: env.action_space(a).sample() for a in env.agents})
        else:
            env.step({a: int(rng.integers(5)) for a in env.agents})
        if not env.agents:
            env.reset()
    return STEPS / (time.perf_counter() - start)


def runner_loop(collect: bool) -> float:
    cfg = validate({"env": {"id": "mpe2.simple_spread_v3"}})
    env, copies = make_vec_env(cfg)
    specs = make_specs(cfg, env)
    actors = {pid: RandomActor(s, rng_for(SEED, pid)) for pid, s in specs.items()}
    runner = Runner(env, specs, actors, set(specs) if collect else set(), copies=copies)
    runner.reset(SEED)
    start = time.perf_counter()
    while runner.env_steps < STEPS:
        runner.step()
    return runner.env_steps / (time.perf_counter() - start)


def main() -> None:
    docs, lean, plain, booked = [], [], [], []
    for _ in range(ROUNDS):
        docs.append(bare_loop(docs_style=True))
        lean.append(bare_loop(docs_style=False))
        plain.append(runner_loop(collect=False))
        booked.append(runner_loop(collect=True))
    d, b = statistics.median(docs), statistics.median(lean)
    p, k = statistics.median(plain), statistics.median(booked)
    print(json.dumps({
        "benchmark": "runner_overhead", "env": "mpe2.simple_spread_v3", "num_envs": 1,
        "steps": STEPS, "rounds": ROUNDS,
        "bare_docs_loop_steps_per_s": round(d, 1), "bare_lean_loop_steps_per_s": round(b, 1),
        "runner_steps_per_s": round(p, 1), "runner_collecting_steps_per_s": round(k, 1),
        "ratio": round(p / d, 3), "ratio_vs_lean_loop": round(p / b, 3),
        "ratio_collecting": round(k / d, 3),
    }))


if __name__ == "__main__":
    main()

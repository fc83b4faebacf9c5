"""VMAS through interplay against VMAS's own batched random loop, on the same device.

    python benchmarks/vmas_speed.py [--scenario navigation] [--envs 64 1024 4096]
                                    [--discrete] [--device cpu] [--train-steps 200000]

For each number of copies, interleaved over several rounds (figures are medians):

- ``vmas_loop``: VMAS alone, as a user writes it for speed: per step, one torch call draws
  each agent's actions for every copy, then ``env.step(actions)``, nothing else (no horizon:
  this loop never resets a copy);
- ``interplay_random``: interplay's runner with random policies stepping the same scenario
  (``env.id: vmas:<scenario>``): actions drawn, observations, rewards and flags written into
  the agent blocks, episodes booked, and every copy reset at the 100-step horizon (the
  rounds pass it), which the VMAS loop is spared.

``ratio`` is ``interplay_random / vmas_loop`` (1.0 = interplay costs nothing). Then, once,
IPPO training env-steps/s with ``configs/ippo_vmas_navigation.yaml`` (its copies, rollout and
networks; ``--train-steps`` env steps). An env step is one step of one copy. Prints one JSON
line per measurement, with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch

from interplay.config.loading import load
from interplay.config.validation import validate
from interplay.experiment.build import make_specs, make_vec_env
from interplay.experiment.loop import train
from interplay.run.actors import RandomActor
from interplay.run.runner import Runner
from interplay.seeding import rng_for

SEED = 0
ROUNDS = 5
PRESET = "configs/ippo_vmas_navigation.yaml"
QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false",
         "checkpoint.at_end=false"]


def vmas_loop(scenario: str, envs: int, continuous: bool, device: str, steps: int
              ) -> Callable[[], float]:
    """VMAS's own loop; returns a function that times ``steps`` steps of it."""
    import vmas

    env = vmas.make_env(scenario, num_envs=envs, device=device, continuous_actions=continuous,
                        seed=SEED)
    env.reset()
    draws = [_drawer(env, agent, continuous, envs, device) for agent in env.agents]

    def run() -> float:
        start = time.perf_counter()
        for _ in range(steps):
            env.step([draw() for draw in draws])
        return steps * envs / (time.perf_counter() - start)

    return run


def _drawer(env: Any, agent: Any, continuous: bool, envs: int, device: str
            ) -> Callable[[], torch.Tensor]:
    """One torch call that draws an agent's actions for every copy."""
    space = env.get_agent_action_space(agent)
    if not continuous:
        return lambda: torch.randint(int(space.n), (envs,), device=device)
    low = torch.as_tensor(space.low, device=device)
    width = torch.as_tensor(space.high, device=device) - low
    return lambda: torch.rand(envs, len(low), device=device) * width + low


def interplay_random(scenario: str, envs: int, continuous: bool, device: str, steps: int
                     ) -> Callable[[], float]:
    """interplay's runner with random policies on ``vmas:<scenario>``."""
    cfg = validate({"env": {"id": f"vmas:{scenario}", "num_envs": envs,
                            "kwargs": {"continuous_actions": continuous}},
                    "train": {"device": device}})
    env, copies = make_vec_env(cfg)
    specs = make_specs(cfg, env)
    actors = {pid: RandomActor(s, rng_for(SEED, pid)) for pid, s in specs.items()}
    runner = Runner(env, specs, actors, copies=copies)
    runner.reset(SEED)

    def run() -> float:
        first, start = runner.env_steps, time.perf_counter()
        for _ in range(steps):
            runner.step(explore=True)
        return (runner.env_steps - first) / (time.perf_counter() - start)

    return run


def sampling(scenario: str, envs: int, continuous: bool, device: str) -> dict[str, Any]:
    steps = max(10, min(200, 100_000 // envs))  # a few seconds per round at most
    loops = {"vmas_loop": vmas_loop(scenario, envs, continuous, device, steps),
             "interplay_random": interplay_random(scenario, envs, continuous, device, steps)}
    for run in loops.values():  # warm up
        run()
    rates: dict[str, list[float]] = {k: [] for k in loops}
    for _ in range(ROUNDS):
        for name, run in loops.items():
            rates[name].append(run())
    med = {k: statistics.median(v) for k, v in rates.items()}
    return {"benchmark": "vmas_speed", "scenario": scenario, "num_envs": envs,
            "continuous_actions": continuous, "device": device, "steps_per_round": steps,
            "vmas_loop": round(med["vmas_loop"]),
            "interplay_random": round(med["interplay_random"]),
            "ratio": round(med["interplay_random"] / med["vmas_loop"], 2)}


def training(steps: int, device: str) -> dict[str, Any]:
    """IPPO env-steps/s with the preset, timed from its first report (set-up excluded)."""
    cfg = load([PRESET], [*QUIET, f"train.steps={steps}", f"train.device={device}",
                          f"log.every={max(steps // 8, 1)}"])
    with tempfile.TemporaryDirectory() as tmp:
        result = train(cfg, tmp)
    rows = [r for r in result.rows if r["phase"] == "train"]
    first, last = rows[0], rows[-1]
    rate = (last["env_steps"] - first["env_steps"]) / (last["wall_s"] - first["wall_s"])
    return {"benchmark": "vmas_ippo_train", "config": PRESET, "device": device,
            "num_envs": cfg.env.num_envs, "env_steps": last["env_steps"],
            "train_env_steps_per_s": round(rate),
            "episode_return_mean": last.get("episode_return_mean")}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--scenario", default="navigation")
    p.add_argument("--envs", type=int, nargs="+", default=[64, 1024, 4096])
    p.add_argument("--discrete", action="store_true", help="discrete actions (default continuous)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--train-steps", type=int, default=200_000, help="0 skips training")
    p.add_argument("--threads", type=int, default=1, help="torch threads (both sides)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    machine = {"cpus": os.cpu_count(), "torch_threads": args.threads}
    for envs in args.envs:
        row = sampling(args.scenario, envs, not args.discrete, args.device)
        print(json.dumps({**row, **machine, "load_avg_1m": round(os.getloadavg()[0], 2)}),
              flush=True)
    if args.train_steps > 0:
        row = training(args.train_steps, args.device)
        print(json.dumps({**row, **machine, "load_avg_1m": round(os.getloadavg()[0], 2)}))


if __name__ == "__main__":
    main()

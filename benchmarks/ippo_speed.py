"""IPPO env-steps/s on native ``spread`` and on mpe2's ``simple_spread_v3``, in one run.

    python benchmarks/ippo_speed.py [--config configs/ippo_spread_fast.yaml] [--steps 2000000]

Three measurements per env, all with the preset's networks and one torch thread:

- ``*_loop``: a plain loop over one env with random actions (the reference: what the env
  costs alone);
- ``*_policy``: the runner stepping the env with the untrained policy choosing every action
  (sampling only, nothing learned);
- ``*_train``: training, sampling and learning together, as ``interplay train`` runs it.

mpe2 trains with ``--mpe2-envs`` in-process copies (its envs step one at a time, so more copies
only add memory). An env step is one step of one copy. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import tempfile
import time
from collections.abc import Callable

import torch
from native_env_speed import mpe2_speed, native_speed

from interplay.config.loading import load
from interplay.config.schema import Config
from interplay.experiment.build import make_actors, make_algorithm, make_specs, make_vec_env
from interplay.experiment.loop import train
from interplay.run.runner import Runner

MPE2 = "mpe2.simple_spread_v3"
QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false",
         "checkpoint.at_end=false"]


def rate_between(marks: list[tuple[int, float]]) -> float:
    """Env-steps/s between the first and the last ``(env steps, time)`` mark."""
    (first, start), (last, end) = marks[0], marks[-1]
    return (last - first) / (end - start)


def policy_speed(cfg: Config, seconds: float) -> float:
    """Env steps/s of the runner with the untrained policy acting, nothing collected."""
    env, copies = make_vec_env(cfg)
    try:
        specs = make_specs(cfg, env)
        actors = make_actors(cfg, specs, make_algorithm(cfg, specs, "cpu"))
        runner = Runner(env, specs, actors, copies=copies)
        runner.reset(cfg.train.seed)
        for _ in range(5):  # warm up
            runner.step()
        first, start = runner.env_steps, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            runner.step()
        return (runner.env_steps - first) / elapsed
    finally:
        env.close()


def train_speed(cfg: Config) -> float:
    """Env steps/s of a whole training run (set-up excluded: it is timed from the first report)."""
    with tempfile.TemporaryDirectory() as tmp:
        result = train(cfg, tmp)
    rows = [r for r in result.rows if r["phase"] == "train"]
    first, last = rows[0], rows[-1]
    return (last["env_steps"] - first["env_steps"]) / (last["wall_s"] - first["wall_s"])


def native_config(config: str, steps: int) -> Config:
    """The preset on native ``spread``, quiet, for ``steps`` env steps and ten reports."""
    return load([config], [*QUIET, f"train.steps={steps}", f"log.every={max(steps // 10, 1)}"])


def mpe2_config(config: str, steps: int, envs: int, rollout: int) -> Config:
    """The preset on mpe2's ``simple_spread_v3`` with ``envs`` copies, quiet, five reports."""
    return load([config], [*QUIET, f"env.id={MPE2}", f"env.num_envs={envs}",
                           f"algo.rollout={rollout}", f"train.steps={steps}",
                           f"log.every={max(steps // 5, 1)}"])


def interplay_speeds(config: str, mpe2_steps: int, batch: int, envs: int,
                     spread_steps: int) -> dict[str, float]:
    """Training env steps/s on mpe2 (``envs`` copies, ``batch`` env steps per update) and on
    native spread with the preset as it is: interplay's side of the library comparisons."""
    mpe2 = mpe2_config(config, mpe2_steps, envs, max(batch // envs, 1))
    return {"interplay_mpe2_train": train_speed(mpe2),
            "interplay_spread_train": train_speed(native_config(config, spread_steps))}


def compare(name: str, library: str, module: str, envs: int,
            measure: Callable[[argparse.Namespace], float],
            more_args: Callable[[argparse.ArgumentParser], None] = lambda p: None) -> None:
    """The main of a ``compare_*.py`` benchmark: ``measure`` the other library's training
    env-steps/s, interplay's alike, and print both with their ratios as one JSON line, or a
    ``skipped`` line when ``module`` cannot be imported."""
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=65_536, help="training env steps on mpe2")
    p.add_argument("--batch", type=int, default=16_384, help="env steps per update on mpe2")
    p.add_argument("--envs", type=int, default=envs, help="mpe2 copies stepped together")
    p.add_argument("--spread-steps", type=int, default=2_000_000)
    p.add_argument("--config", default="configs/ippo_spread_fast.yaml")
    p.add_argument("--seed", type=int, default=0)
    more_args(p)
    args = p.parse_args()
    try:
        version = importlib.metadata.version(library)
        importlib.import_module(module)
    except ImportError as err:
        print(json.dumps({"benchmark": f"compare_{name}", "skipped": f"{module}: {err}"}))
        return
    torch.set_num_threads(1)
    ours = interplay_speeds(args.config, args.steps, args.batch, args.envs, args.spread_steps)
    theirs = measure(args)
    print(json.dumps({
        "benchmark": f"compare_{name}", name: version, "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2), "env": MPE2, **vars(args),
        f"{name}_mpe2_train": round(theirs), **{k: round(v) for k, v in ours.items()},
        f"interplay_mpe2_over_{name}": round(ours["interplay_mpe2_train"] / theirs, 1),
        f"interplay_spread_over_{name}": round(ours["interplay_spread_train"] / theirs, 1),
    }))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="configs/ippo_spread_fast.yaml")
    p.add_argument("--steps", type=int, default=2_000_000, help="training env steps on spread")
    p.add_argument("--mpe2-steps", type=int, default=40_000)
    p.add_argument("--mpe2-envs", type=int, default=16)
    p.add_argument("--seconds", type=float, default=3.0)
    args = p.parse_args()
    torch.set_num_threads(1)
    native = native_config(args.config, args.steps)
    n = args.mpe2_envs
    rollout = max(native.algo.rollout * native.env.num_envs // n, 1)  # same rows per update
    mpe2 = mpe2_config(args.config, args.mpe2_steps, n, rollout)
    out = {
        "benchmark": "ippo_speed", "config": args.config, "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "spread_loop": native_speed(args.seconds), "mpe2_loop": mpe2_speed(args.seconds),
        "spread_policy": policy_speed(native, args.seconds),
        "mpe2_policy": policy_speed(mpe2, args.seconds),
        "spread_train": train_speed(native), "mpe2_train": train_speed(mpe2),
    }
    out = {k: round(v) if isinstance(v, float) else v for k, v in out.items()}
    out["spread_train_over_mpe2_train"] = round(out["spread_train"] / out["mpe2_train"], 1)
    out["spread_train_over_mpe2_loop"] = round(out["spread_train"] / out["mpe2_loop"], 1)
    out["spread_policy_over_mpe2_policy"] = round(out["spread_policy"] / out["mpe2_policy"], 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

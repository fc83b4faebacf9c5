"""Train a preset on a native MPE task, then score its greedy policy on mpe2's own env.

    python benchmarks/ppo_mpe.py configs/ippo_spread.yaml --eval-env mpe2.simple_spread_v3

Prints one JSON line: env steps, wall-clock minutes, and the per-agent mean episode return
of the greedy policy over ``--episodes`` episodes of the mpe2 env (and of the native one).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from typing import Any

import numpy as np
import torch

from interplay.config.loading import load
from interplay.config.schema import Config
from interplay.experiment.build import make_specs, make_vec_env
from interplay.experiment.loop import train
from interplay.run.callbacks import Callbacks
from interplay.run.runner import Runner


class KeepRunner(Callbacks):
    def on_env_created(self, *, env: Any, env_index: int, runner: Any) -> None:
        self.runner = runner


def greedy_score(cfg: Config, actors: dict, env_id: Any, episodes: int, seed: int) -> float:
    """Per-agent mean episode return of the greedy policies over ``episodes`` episodes."""
    copies = min(episodes, 20)
    env, pz = make_vec_env(cfg, num_envs=copies, env_id=env_id)
    try:
        runner = Runner(env, make_specs(cfg, env), actors, copies=pz)
        runner.reset(seed)
        while runner.episodes < episodes:
            runner.step(explore=False)
        summary = runner.window.summary()
    finally:
        env.close()
    return float(np.mean([v for k, v in summary.items() if k.startswith("agent_return_mean/")]))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("configs", nargs="*")
    p.add_argument("-s", "--set", action="append", default=[])
    p.add_argument("--eval-env", required=True, help="e.g. mpe2.simple_spread_v3")
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--run-dir", help="keep the run folder here (default: a temporary one)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load(args.configs, [*args.set, "log.console=false"])
    keep = KeepRunner()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        result = train(cfg, args.run_dir or tmp, callbacks=[keep])
    minutes = (time.perf_counter() - start) / 60
    actors = {g.spec.id: g.actor for g in keep.runner.groups}
    seed = cfg.train.seed + 1000
    print(json.dumps({
        "benchmark": "ppo_mpe", "configs": args.configs, "overrides": args.set,
        "algo": cfg.algo.name, "train_env": cfg.env.id, "eval_env": args.eval_env,
        "seed": cfg.train.seed, "env_steps": result.env_steps, "train_minutes": round(minutes, 2),
        "last_train_agent_return": result.last.get(f"policy_return_mean/{next(iter(actors))}"),
        "native_greedy": round(greedy_score(cfg, actors, cfg.env.id, args.episodes, seed), 3),
        "mpe2_greedy": round(greedy_score(cfg, actors, args.eval_env, args.episodes, seed), 3),
    }), flush=True)


if __name__ == "__main__":
    main()

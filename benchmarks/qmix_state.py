"""QMIX on mpe2's simple_spread_v3 itself, its mixer on the env's state() or on the agents'
observations joined (``algo.state``), then each greedy policy scored on the same env.

    python benchmarks/qmix_state.py --steps 40000 --episodes 100

Prints one JSON line per mode: env steps, wall-clock minutes, and the greedy policy's mean
episode return per agent over ``--episodes`` episodes (as ``interplay eval RUN_DIR --env
mpe2.simple_spread_v3`` reports it). The settings are those of configs/qmix_spread.yaml, with
exploration and the learning start scaled to the budget.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from rich.console import Console

from interplay.config.loading import load
from interplay.experiment.evaluate import evaluate
from interplay.experiment.loop import train

ENV = "mpe2.simple_spread_v3"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40_000)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modes", nargs="+", default=["env", "observations"])
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes:
            run = Path(tmp) / mode
            start = time.perf_counter()
            train(load([here / "configs/qmix_spread.yaml"], [
                f"env.id={ENV}", "env.num_envs=8", "algo.train_every=8",
                f"algo.state={mode}", f"train.steps={args.steps}", f"train.seed={args.seed}",
                f"algo.exploration_steps={int(args.steps * 0.6)}",
                f"algo.learning_starts={min(3200, args.steps // 10)}",
                "train.test_frequency=-1", f"log.every={max(args.steps // 4, 1)}",
                "log.console=false", "log.tensorboard=false", "log.curve=false"]), run)
            minutes = (time.perf_counter() - start) / 60
            report = evaluate(run, episodes=args.episodes, env_id=ENV,
                              console=Console(file=open("/dev/null", "w")))  # noqa: SIM115
            agents = [k for k in report if k.startswith("agent_return_mean/")]
            per_agent = sum(report[k] for k in agents) / len(agents)
            print(json.dumps({"benchmark": "qmix_state", "env": ENV, "state": mode,
                              "seed": args.seed, "env_steps": args.steps,
                              "minutes": round(minutes, 2), "eval_episodes": args.episodes,
                              "greedy_return_per_agent": round(per_agent, 2)}), flush=True)


if __name__ == "__main__":
    main()

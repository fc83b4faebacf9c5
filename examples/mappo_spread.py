"""Cooperative MPE with MAPPO, from a config to a GIF (docs/tutorial_mappo_mpe.md).

Trains MAPPO on the built-in, natively batched `spread` (mpe2's simple_spread_v3, stepped as
arrays), scores the greedy policy on mpe2's own env and draws one episode into a GIF.

    python examples/mappo_spread.py            # configs/mappo_spread.yaml: about 5 minutes
    python examples/mappo_spread.py --smoke    # a few seconds: every step, a tiny budget
"""

from __future__ import annotations

import argparse
from pathlib import Path

import interplay
from interplay.experiment.evaluate import evaluate

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="a tiny budget, to check it all runs")
    p.add_argument("--run-dir", default="runs/mappo-spread", help="where to write the run folder")
    args = p.parse_args()

    smoke = ["train.steps=20000", "env.num_envs=16", "algo.rollout=25", "algo.epochs=2",
             "log.every=10000"] if args.smoke else []
    cfg = interplay.load_config([ROOT / "configs" / "mappo_spread.yaml"],
                                overrides=["log.console=false", *smoke])
    result = interplay.train(cfg, args.run_dir, overwrite=True)
    last = result.rows[-1]
    print(f"trained {result.env_steps:,} env steps; return per agent in the last report: "
          f"{last['policy_return_mean/agent']:.1f}")

    gif = Path(args.run_dir) / "spread.gif"
    report = evaluate(args.run_dir, env_id="mpe2.simple_spread_v3",
                      episodes=4 if args.smoke else 100, render=gif)
    print(f"on mpe2.simple_spread_v3: {report['policy_return_mean/agent']:.1f} per agent "
          f"(random: about -26); one episode drawn in {report['render']}")


if __name__ == "__main__":
    main()

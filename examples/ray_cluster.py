"""From a laptop to a Ray cluster: the same run on Ray env runners (docs/tutorial_ray.md).

    python examples/ray_cluster.py                    # a local Ray with 2 env runners
    python examples/ray_cluster.py --address auto     # join the cluster this node is part of
    python examples/ray_cluster.py --smoke            # a few seconds: every step, a tiny budget
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import interplay

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="a tiny budget, to check it all runs")
    p.add_argument("--address", default="", help="empty: start Ray here; auto or an address: join")
    p.add_argument("--runners", type=int, default=2, help="Ray env runners")
    p.add_argument("--run", default="runs/ray_spread", help="the run's folder")
    args = p.parse_args()
    steps = 20_000 if args.smoke else 2_000_000
    over = [f"train.steps={steps}", "env.num_envs=64", "log.console=false",
            f"log.every={steps // 4}", "backend.name=ray", f"backend.address={args.address}",
            f"backend.num_env_runners={args.runners}", "backend.envs_per_runner=32"]
    cfg = interplay.load_config([ROOT / "configs" / "ippo_spread_fast.yaml"], overrides=over)
    run = Path(args.run)
    shutil.rmtree(run, ignore_errors=True)
    result = interplay.train(cfg, run)
    for row in result.rows:
        if row["phase"] == "train":
            print(f"{row['env_steps']:>9,} env steps  return {row['episode_return_mean']:7.1f}  "
                  f"{row['env_steps_per_s']:>8,.0f} env-steps/s  restarts "
                  f"{row['runner_restarts']}")
    # The run folder is a local run's: resume it here, without Ray, for as many steps again.
    more = interplay.resume(run, [f"train.steps={2 * steps}", "backend.name=local"])
    last = [r for r in more.rows if r["phase"] == "train"][-1]
    print(f"resumed locally to {last['env_steps']:,} env steps: return "
          f"{last['episode_return_mean']:.1f}")


if __name__ == "__main__":
    main()

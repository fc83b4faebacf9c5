"""Evolutionary hyper-parameter search on spread (docs/tutorial_hpo.md).

    python examples/hpo_spread.py            # the preset: 6 members, up to 12 generations
    python examples/hpo_spread.py --smoke    # a few seconds: every step, a tiny budget
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import interplay
from interplay.experiment.evaluate import evaluate
from interplay.population.hpo import search

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="a tiny budget, to check it all runs")
    p.add_argument("--run", default="runs/hpo_spread", help="the search's folder")
    args = p.parse_args()
    over = []
    if args.smoke:
        over = ["hpo.population=3", "hpo.generations=2", "hpo.evo_steps=2000",
                "env.num_envs=16", "train.test_episodes=16"]
    cfg = interplay.load_config([ROOT / "configs" / "hpo_spread.yaml"], overrides=over)
    run = Path(args.run)
    shutil.rmtree(run, ignore_errors=True)
    best = search(cfg, run)
    for line in (run / "hpo.jsonl").read_text().splitlines():
        row = json.loads(line)
        print(f"generation {row['generation']} {row['member']:>4} (from {row['parent']}) "
              f"lr {row['hyperparameters']['lr']:.2e} fitness {row['fitness']:.1f}: "
              f"{row['mutation']}")
    report = evaluate(best, episodes=10 if args.smoke else 100)
    print(f"best member: {report['episode_return_mean'] / 3:.1f} per agent")


if __name__ == "__main__":
    main()

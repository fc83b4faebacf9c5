"""Recurrent policies on a memory task (docs/tutorial_recurrent.md).

`interplay.envs.recall` shows each agent a cue at the first step only and pays 1 for naming
it some steps later. Trains the GRU preset (configs/ippo_recall_gru.yaml) and the same
settings without memory, and prints both test scores: the GRU recalls, the MLP guesses.

    python examples/recurrent_recall.py            # two runs of at most 150k env steps
    python examples/recurrent_recall.py --smoke    # a few seconds: every step, a tiny budget
"""

from __future__ import annotations

import argparse
from pathlib import Path

import interplay

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="a tiny budget, to check it all runs")
    p.add_argument("--runs", default="runs/recall", help="the folder for the two run folders")
    args = p.parse_args()

    # Stop at the first test phase that recalls 95% of cues: later phases may dip.
    budget = ["train.target=0.95", "train.target_metric=policy_return_mean/agent"]
    if args.smoke:
        budget += ["train.steps=2048", "train.test_frequency=1024", "train.test_episodes=20",
                   "log.every=1024", "algo.rollout=32", "algo.model.seq_len=8", "algo.epochs=2"]
    scores = {}
    for memory in ("gru", "none"):
        cfg = interplay.load_config([ROOT / "configs" / "ippo_recall_gru.yaml"],
                                    overrides=[f"algo.model.recurrent={memory}", "log.console=false",
                                               *budget])
        result = interplay.train(cfg, Path(args.runs) / memory, overwrite=True)
        scores[memory] = result.last_test["policy_return_mean/agent"]
        print(f"{memory}: {scores[memory]:.0%} of cues recalled after {result.env_steps:,} env "
              f"steps")
    chance = 1 / 4  # four cues
    print(f"recalled the cue: GRU {scores['gru']:.0%}, no memory {scores['none']:.0%} "
          f"(chance {chance:.0%})")


if __name__ == "__main__":
    main()

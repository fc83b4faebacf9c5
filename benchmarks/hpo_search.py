"""Evolutionary search against one learner at the worst starting learning rate, in one run.

    python benchmarks/hpo_search.py [--config configs/hpo_spread.yaml] [--generations 8]

The search (``interplay hpo`` on the config) starts its members' learning rates from
``hpo.init``; the baseline is one learner with the same settings at the lowest learning rate
any member started from, trained for as many env steps as one member. One JSON line per
generation of the search (best and mean fitness, wall-clock so far), then one summary line:
the generation at which the search reached ``train.target`` (if it did), the baseline's
fitness at the same env steps, and the wall-clock of each (the search trains its members one
after another, so it costs about ``population`` times one learner).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from interplay.config.loading import load
from interplay.experiment.loop import Experiment
from interplay.population.hpo import search


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="configs/hpo_spread.yaml")
    p.add_argument("--generations", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    over = [f"train.seed={args.seed}"]
    if args.generations:
        over.append(f"hpo.generations={args.generations}")
    cfg = load([args.config], over)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        search(cfg, Path(tmp) / "search")
        search_s = time.perf_counter() - start
        rows = [json.loads(x) for x in (Path(tmp) / "search" / "hpo.jsonl").read_text().splitlines()]
        reached = None
        gens = sorted({r["generation"] for r in rows})
        for g in gens:
            this = [r for r in rows if r["generation"] == g]
            best = max(r["fitness"] for r in this)
            print(json.dumps({"benchmark": "hpo_search", "generation": g, "best": round(best, 2),
                              "mean": round(sum(r["fitness"] for r in this) / len(this), 2),
                              "env_steps_per_member": this[0]["env_steps"]}))
            if reached is None and cfg.train.target is not None and best >= cfg.train.target:
                reached = g
        worst_lr = min(r["hyperparameters"]["lr"] for r in rows if r["generation"] == 0)
        steps = max(r["env_steps"] for r in rows)
        base = load([args.config], [*over, f"algo.lr={worst_lr}", f"train.steps={steps}",
                                    "train.target=null", f"train.test_frequency={steps}"])
        start = time.perf_counter()
        exp = Experiment(base, Path(tmp) / "single")
        exp.run()
        single = exp.test_phase(0.0)["episode_return_mean"]
        exp.close()
        single_s = time.perf_counter() - start
    print(json.dumps({
        "benchmark": "hpo_search_summary", "config": args.config,
        "population": cfg.hpo.population, "generations_run": len(gens),
        "target": cfg.train.target, "reached_at_generation": reached,
        "best_fitness": round(max(r["fitness"] for r in rows), 2),
        "worst_initial_lr": worst_lr, "single_at_worst_lr": round(single, 2),
        "env_steps_per_member": steps, "search_wall_s": round(search_s, 1),
        "single_wall_s": round(single_s, 1),
        "search_over_single_wall": round(search_s / max(single_s, 1e-9), 2),
    }))


if __name__ == "__main__":
    main()

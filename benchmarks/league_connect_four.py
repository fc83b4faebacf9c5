"""The connect four league preset (configs/league_connect_four.yaml) trained, then its learner
scored against random play and the scripted lookahead players, both seats equally.

    python benchmarks/league_connect_four.py                      # the preset: 2M env steps
    python benchmarks/league_connect_four.py --steps 400000 -s league.fixed=[random]
    python benchmarks/league_connect_four.py --run RUN_DIR        # score a run already trained

Prints one JSON line: env steps, wall-clock minutes of training, the learner's win/draw/loss
rates over ``--games`` games against each opponent (as ``interplay eval RUN_DIR --vs``
reports them), its final rating, and the best rating among the snapshots taken in the
first quarter of training (the ratings of snapshots that have left the pool included).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from rich.console import Console

from interplay.config.schema import load
from interplay.experiment.evaluate import evaluate
from interplay.experiment.loop import train
from interplay.experiment.versus import OUTCOMES

OPPONENTS = ("random", "interplay.envs.connect_four:one_ply",
             "interplay.envs.connect_four:two_ply")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, help="env steps (default: the preset's)")
    parser.add_argument("--run", type=Path, help="score this run folder instead of training")
    parser.add_argument("--games", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-s", "--set", action="append", default=[], dest="overrides",
                        help="a preset setting to change, e.g. -s league.opponent_sampling=uniform")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    quiet = Console(file=open("/dev/null", "w"))  # noqa: SIM115
    with tempfile.TemporaryDirectory() as tmp:
        run, minutes = args.run, None
        if run is None:
            run = Path(tmp) / "league"
            steps = [f"train.steps={args.steps}"] if args.steps else []
            start = time.perf_counter()
            train(load([here / "configs/league_connect_four.yaml"], [
                *steps, f"train.seed={args.seed}", "log.console=false",
                "log.tensorboard=false", "log.curve=false", *args.overrides]), run)
            minutes = round((time.perf_counter() - start) / 60, 1)
        cfg = load([run / "config.yaml"], [])
        scores = {}
        for opponent in OPPONENTS:
            report = evaluate(run, episodes=args.games, vs=opponent, console=quiet)
            scores[opponent.rpartition(":")[2]] = {
                k: round(report[f"{k}_rate"], 3) for k in OUTCOMES}
        last = json.loads((run / "league.jsonl").read_text().splitlines()[-1])
        quarter = cfg.train.steps // 4
        early = [n for n in last["ratings"]
                 if n.startswith("snapshot_") and int(n.rpartition("_")[2]) <= quarter]
        print(json.dumps({
            "benchmark": "league_connect_four", "run": str(args.run or "preset"),
            "algo": cfg.algo.name, "seed": cfg.train.seed, "env_steps": cfg.train.steps,
            "overrides": args.overrides, "minutes": minutes, "games": args.games,
            "vs": scores, "learner_rating": last["ratings"]["learner"],
            "best_first_quarter_snapshot": max((last["ratings"][n] for n in early),
                                               default=None)}), flush=True)


if __name__ == "__main__":
    main()

"""The connect four league preset (configs/league_connect_four.yaml) trained, then its learner
scored against random play and the scripted lookahead players, both seats equally.

    python benchmarks/league_connect_four.py                      # the preset: 800k env steps
    python benchmarks/league_connect_four.py --steps 200000 -s "league.fixed=[random, 'interplay.envs.connect_four:one_ply']"

Prints one JSON line: env steps, wall-clock minutes of training, the learner's win/draw/loss
rates over ``--games`` games against each opponent (as ``interplay eval RUN_DIR --vs``
reports them), its final Elo rating, and the best rating among the snapshots taken in the
first quarter of training.
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
    parser.add_argument("--steps", type=int, default=800_000)
    parser.add_argument("--games", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-s", "--set", action="append", default=[], dest="overrides",
                        help="a preset setting to change, e.g. -s league.learn_from_members=false")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    quiet = Console(file=open("/dev/null", "w"))  # noqa: SIM115
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "league"
        start = time.perf_counter()
        train(load([here / "configs/league_connect_four.yaml"], [
            f"train.steps={args.steps}", f"train.seed={args.seed}", "log.console=false",
            "log.tensorboard=false", "log.curve=false", *args.overrides]), run)
        minutes = (time.perf_counter() - start) / 60
        scores = {}
        for opponent in OPPONENTS:
            report = evaluate(run, episodes=args.games, vs=opponent, console=quiet)
            scores[opponent.rpartition(":")[2]] = {
                k: round(report[f"{k}_rate"], 3) for k in OUTCOMES}
        last = json.loads((run / "league.jsonl").read_text().splitlines()[-1])
        early = [m["name"] for m in last["members"]
                 if m["kind"] == "snapshot" and m["env_steps"] <= args.steps // 4]
        print(json.dumps({
            "benchmark": "league_connect_four", "seed": args.seed, "env_steps": args.steps,
            "overrides": args.overrides, "minutes": round(minutes, 1), "games": args.games,
            "vs": scores, "learner_rating": last["ratings"]["learner"],
            "best_first_quarter_snapshot": max((last["ratings"][n] for n in early),
                                               default=None)}), flush=True)


if __name__ == "__main__":
    main()

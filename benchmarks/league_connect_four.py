"""The connect four league preset (configs/league_connect_four.yaml) trained, then its learner
scored against random play and the scripted lookahead players (random among the moves they
do not force, and centre-first), both seats equally.

    python benchmarks/league_connect_four.py                      # the preset: 2M env steps
    python benchmarks/league_connect_four.py --steps 400000 -s league.fixed=[random]
    python benchmarks/league_connect_four.py --run RUN_DIR        # score a run already trained
    python benchmarks/league_connect_four.py --run RUN_DIR --exploit 500000
    python benchmarks/league_connect_four.py --run RUN_DIR --exploit-snapshots 100000

Prints one JSON line: env steps, wall-clock minutes of training, the learner's win/draw/loss
rates over ``--games`` games against each opponent, overall and per seat (as ``interplay eval
RUN_DIR --vs`` reports them; the scripted players' games open with ``--opening`` random moves,
so that two deterministic players do not replay one game), its final rating, the best rating
among the snapshots taken in the first quarter of training (the ratings of snapshots that have
left the pool included), the league's exploitability checks if it made any, and with
``--exploit N`` the win rates of a best response trained N env steps against it
(``interplay exploit``). ``--exploit-snapshots N`` gives the exploitability curve over
training after the fact: a fresh best response of N env steps against each league snapshot
the run kept, as ``league.exploit_every`` checks the newest one while training.
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
from interplay.experiment.loop import Experiment, train
from interplay.experiment.policies import load_run, pick_policy
from interplay.experiment.versus import OUTCOMES
from interplay.population.league.best_response import best_response
from interplay.population.league.exploit import exploit
from interplay.seeding import derived_seed

OPPONENTS = ("random", "interplay.envs.connect_four:one_ply",
             "interplay.envs.connect_four:two_ply", "interplay.envs.connect_four:center_one_ply",
             "interplay.envs.connect_four:center_two_ply")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, help="env steps (default: the preset's)")
    parser.add_argument("--run", type=Path, help="score this run folder instead of training")
    parser.add_argument("--games", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--opening", type=int, default=2,
                        help="random moves opening each game against the scripted players")
    parser.add_argument("--exploit", type=int, default=0, metavar="N",
                        help="also train a best response for N env steps and score it")
    parser.add_argument("--exploit-snapshots", type=int, default=0, metavar="N",
                        help="also train a best response for N env steps against each league "
                             "snapshot the run kept: the exploitability curve")
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
            report = evaluate(run, episodes=args.games, vs=opponent, console=quiet,
                              opening=0 if opponent == "random" else args.opening,
                              out=run / "bench_eval.json")
            scores[opponent.rpartition(":")[2]] = _rates(report)
        exploited = None
        if args.exploit:
            report = exploit(run, steps=args.exploit, games=args.games, opening=args.opening,
                             console=quiet)
            exploited = {**_rates(report), "curve": [
                (p["env_steps"], round(p["win_rate"], 3)) for p in report["curve"]]}
        curve = snapshot_curve(run, args.exploit_snapshots, args.games, args.opening) \
            if args.exploit_snapshots else None
        lines = [json.loads(x) for x in (run / "league.jsonl").read_text().splitlines()]
        last = lines[-1]
        quarter = cfg.train.steps // 4
        early = [n for n in last["ratings"]
                 if n.startswith("snapshot_") and int(n.rpartition("_")[2]) <= quarter]
        print(json.dumps({
            "benchmark": "league_connect_four", "run": str(args.run or "preset"),
            "algo": cfg.algo.name, "seed": cfg.train.seed, "env_steps": cfg.train.steps,
            "overrides": args.overrides, "minutes": minutes, "games": args.games,
            "vs": scores, "learner_rating": last["ratings"]["learner"],
            "best_first_quarter_snapshot": max((last["ratings"][n] for n in early),
                                               default=None),
            "exploitability_checks": [(x["env_steps"], x["exploitability"]) for x in lines
                                      if "exploitability" in x],
            "best_response": exploited, "exploitability_of_snapshots": curve}), flush=True)


def snapshot_curve(run: Path, steps: int, games: int, opening: int) -> list[tuple[int, float]]:
    """(env steps, the best response's greedy win rate) for each league snapshot of ``run``:
    a fresh best response of ``steps`` env steps against it, seeded as the league's own
    checks are."""
    loaded = load_run(run, where="--exploit-snapshots")
    pid = pick_policy(loaded, None, "--exploit-snapshots")
    out = []
    snaps = {int(p.stem.rpartition("_")[2]): p for p in (run / "league").glob("snapshot_*.pt")}
    for at, snap in sorted(snaps.items()):
        report = best_response(Experiment, loaded.cfg, pid, str(snap), steps, games, opening,
                               derived_seed(loaded.cfg.train.seed, "exploit", str(at)),
                               run / "exploit" / f"snapshot_{at}")
        out.append((at, round(report["exploitability"], 3)))
    return out


def _rates(report: dict) -> dict:
    """Overall and per-seat win/draw/loss rates of an ``--vs`` report."""
    seats = [k.split("/", 1)[1] for k in report if k.startswith("episodes/")]
    out = {k: round(report[f"{k}_rate"], 3) for k in OUTCOMES}
    for seat in seats:
        out[seat] = {k: round(report[f"{k}_rate/{seat}"], 3) for k in OUTCOMES}
    return out


if __name__ == "__main__":
    main()

"""A self-play league on Ray env runners against the same league run locally, in one run.

IPPO on connect four (PettingZoo, stepped in Python), one learner on both seats, a snapshot
into the pool every eighth of the budget (at most 4 kept) beside a random and a scripted
one-ply member, opponents drawn by pfsp; 8 env copies in all: local (one process), Ray with
one runner of 8 copies, and Ray with two runners of 4. On Ray the members act in the runners.
Prints one JSON line per configuration: training env-steps/s after the first report (Ray's
start-up left out), its ratio over local, the whole run's wall time, the games the league
rated, and the machine's load average before the run (other work on the same cores lowers the
Ray figures most). Needs the ``ray`` and ``pettingzoo[classic]`` extras.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from interplay.backends.ray.cluster import connect, disconnect
from interplay.config.loading import load
from interplay.config.schema import BackendConfig
from interplay.experiment.loop import train

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 16_000
COMMON = ["env.id=pettingzoo.classic.connect_four_v3", "env.num_envs=8", "train.self_play=true",
          "algo.name=ippo", "algo.rollout=64", "algo.epochs=2", "algo.minibatches=4",
          "algo.model.hidden=[64, 64]", f"league.snapshot_every={STEPS // 8}",
          "league.max_snapshots=4", "league.opponent_sampling=pfsp",
          "league.fixed=[random, 'interplay.envs.connect_four:one_ply']",
          f"train.steps={STEPS}", f"log.every={STEPS // 8}", "train.device=cpu",
          "train.test_frequency=-1", "log.console=false", "log.tensorboard=false",
          "log.curve=false", "checkpoint.at_end=false"]
CASES = {
    "local": [],
    "ray_1x8": ["backend.name=ray", "backend.num_env_runners=1"],
    "ray_2x4": ["backend.name=ray", "backend.num_env_runners=2", "backend.envs_per_runner=4"],
}


def rate(rows: list[dict]) -> float:
    """Env steps per second after the first report (start-up and warm-up left out)."""
    train_rows = [r for r in rows if r["phase"] == "train"]
    first, last = train_rows[0], train_rows[-1]
    return (last["env_steps"] - first["env_steps"]) / (last["wall_s"] - first["wall_s"])


def games(run: Path) -> int:
    """The games the league rated (its last line's members, those still in the pool)."""
    last = json.loads((run / "league.jsonl").read_text().splitlines()[-1])
    return sum(m["games"] for m in last["members"])


def main() -> None:
    load_before = os.getloadavg()
    started = connect(BackendConfig(name="ray"), num_cpus=os.cpu_count())
    try:
        results = {}
        with tempfile.TemporaryDirectory() as tmp:
            for name, extra in CASES.items():
                t = time.perf_counter()
                result = train(load([], [*COMMON, *extra]), Path(tmp) / name)
                results[name] = (rate(result.rows), time.perf_counter() - t,
                                 games(Path(tmp) / name))
        base = results["local"][0]
        for name, (r, wall, n) in results.items():
            print(json.dumps({"bench": "ray_league", "config": name, "env_steps": STEPS,
                              "env_steps_per_s": round(r, 1), "ratio": round(r / base, 3),
                              "wall_s": round(wall, 1), "games_in_pool": n,
                              "cpus": os.cpu_count(),
                              "load_avg_before": [round(x, 2) for x in load_before]}))
    finally:
        disconnect(started)


if __name__ == "__main__":
    main()

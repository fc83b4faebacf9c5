"""Training env-steps/s with Ray env runners against the local backend, in one run.

IPPO on mpe2 simple_spread_v3 (a PettingZoo env stepped in Python, so the env is most of the
cost), 8 env copies in all: local (one process), Ray with one runner of 8 copies, and Ray
with two runners of 4. The learner is the same in each; the figure is env steps over the
run's wall time (sampling and learning, Ray's start-up excluded: it is measured from the
first report on). Prints one JSON line per configuration with ``ratio`` over local, and the
machine's load average before the run (other work on the same cores lowers the Ray figures
most). Needs the ``ray`` and ``mpe2`` extras.

Beside the rate, each Ray line says where the learner's time went (the means of the train
rows' ``ray/*`` figures after the first row): ``sample_share``, the share of the wall time it
waited for the runners' steps; ``sample_wait_s`` and ``learn_s``, the seconds it waited and
learned per update. A share near 1 (waits much longer than learning) says more runners, or
more copies per runner, would help; near 0 says the learner is the bottleneck, and more
runners would only wait for it. ``python benchmarks/ray_scaling.py STEPS`` sets the budget.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interplay.backends.ray.cluster import connect, disconnect
from interplay.config.loading import load
from interplay.config.schema import BackendConfig
from interplay.experiment.loop import train

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 24_000
COMMON = ["env.id=mpe2.simple_spread_v3", "env.num_envs=8", "env.kwargs={max_cycles: 25}",
          "algo.name=ippo", "algo.rollout=64", "algo.epochs=2", "algo.minibatches=4",
          f"train.steps={STEPS}", f"log.every={STEPS // 6}", "train.device=cpu",
          "log.console=false", "log.tensorboard=false", "log.curve=false",
          "checkpoint.at_end=false"]
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


def learner_time(rows: list[dict]) -> dict[str, float]:
    """Means of the train rows' ``ray/*`` timings after the first row (warm-up left out)."""
    train_rows = [r for r in rows if r["phase"] == "train"][1:]
    out = {}
    for key in ("sample_share", "sample_wait_s", "learn_s"):
        values = [r[f"ray/{key}"] for r in train_rows if f"ray/{key}" in r]
        if values:
            out[key] = round(sum(values) / len(values), 4)
    return out


def compare(bench: str, common: list[str], steps: int,
            figures: Callable[[Path, Any], dict[str, Any]]) -> None:
    """Train ``common`` locally and in each Ray layout of ``CASES``, in this process, and print
    one JSON line per layout: env-steps/s after the first report, its ratio over local, the
    whole run's wall time, and ``figures(run_dir, result)``."""
    load_before = os.getloadavg()
    started = connect(BackendConfig(name="ray"), num_cpus=os.cpu_count())
    try:
        results = {}
        with tempfile.TemporaryDirectory() as tmp:
            for name, extra in CASES.items():
                t = time.perf_counter()
                result = train(load([], [*common, *extra]), Path(tmp) / name)
                results[name] = (rate(result.rows), time.perf_counter() - t,
                                 figures(Path(tmp) / name, result))
        base = results["local"][0]
        for name, (r, wall, more) in results.items():
            print(json.dumps({"bench": bench, "config": name, "env_steps": steps,
                              "env_steps_per_s": round(r, 1), "ratio": round(r / base, 3),
                              **more, "wall_s": round(wall, 1), "cpus": os.cpu_count(),
                              "load_avg_before": [round(x, 2) for x in load_before]}))
    finally:
        disconnect(started)


def main() -> None:
    compare("ray_scaling", COMMON, STEPS, lambda _run, result: learner_time(result.rows))


if __name__ == "__main__":
    main()

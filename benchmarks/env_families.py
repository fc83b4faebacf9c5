"""One env of each family interplay drives: ``interplay check``, random play through the
runner against the env's lean bare loop, and a short IPPO run.

    python benchmarks/env_families.py [--steps 2000] [--rounds 3] [--ippo-steps 2048]
                                      [--families openspiel gymma ...]

Prints one JSON line per env: its family and id, whether ``check`` passed (and its warnings),
random env-steps/s through interplay's runner (one copy, actions drawn by ``RandomActor``)
over the lean bare loop of ``runner_overhead.py`` (medians of interleaved rounds, one env step
being one agent's move in an AEC env), and IPPO's training env-steps/s. Envs whose package is
not installed print ``"skipped"`` with the reason.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from runner_overhead import bare_aec, bare_parallel, runner_loop

from interplay.config.validation import validate
from interplay.envs.adapters import is_aec
from interplay.envs.check import check_env
from interplay.envs.registry import env_factory
from interplay.errors import UserError
from interplay.experiment.loop import train

ENVS: list[tuple[str, str, dict[str, Any]]] = [
    ("openspiel", "openspiel:leduc_poker", {}),
    ("openspiel", "openspiel:goofspiel", {"num_cards": 6}),
    ("gymma", "gymma:rware-tiny-2ag-v2", {}),
    ("classic", "pettingzoo.classic.connect_four_v3", {}),
    ("mpe2", "mpe2.simple_spread_v3", {}),
    ("butterfly", "pettingzoo.butterfly.knights_archers_zombies_v11", {}),
    ("sisl", "pettingzoo.sisl.pursuit_v5", {}),
    ("magent2", "magent2.environments.battle_v4", {"map_size": 20}),
]


def checked(env_id: str, kwargs: dict[str, Any]) -> tuple[bool, list[str]]:
    """Whether ``interplay check`` passes, and the warnings it gave."""
    said: list[str] = []
    cfg = validate({"env": {"id": env_id, "kwargs": kwargs}})
    problems = check_env(cfg, cycles=200, say=said.append)
    return not problems, [s.removeprefix("warn  ") for s in said if s.startswith("warn")]


def random_rates(env_id: str, kwargs: dict[str, Any], steps: int, rounds: int) -> tuple[float, float]:
    """Medians of the lean bare loop's and the runner's random env-steps/s."""
    make = env_factory(env_id, kwargs)
    probe = make()
    aec = is_aec(probe)
    probe.close()
    bare, ours = [], []
    for _ in range(rounds):
        bare.append(bare_aec(make, False, steps) if aec else bare_parallel(make, False, steps))
        ours.append(runner_loop(env_id, "auto", collect=False, kwargs=kwargs, steps=steps))
    return statistics.median(bare), statistics.median(ours)


def ippo_rate(env_id: str, kwargs: dict[str, Any], steps: int) -> float:
    """IPPO's training env-steps/s over a short run on one copy."""
    with tempfile.TemporaryDirectory() as run:
        cfg = validate({"env": {"id": env_id, "kwargs": kwargs}, "algo": {"name": "ippo", "rollout": 128},
                        "train": {"steps": steps},
                        "log": {"every": steps, "console": False, "tensorboard": False, "curve": False}})
        train(cfg, Path(run))
        rows = [json.loads(line) for line in (Path(run) / "metrics.jsonl").read_text().splitlines()]
    return float(rows[-1]["env_steps_per_s"])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=2000, help="env steps per timed random loop")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--ippo-steps", type=int, default=2048, help="0 skips the IPPO runs")
    p.add_argument("--families", nargs="*", help="only these families (default: all)")
    args = p.parse_args()
    for family, env_id, kwargs in ENVS:
        if args.families and family not in args.families:
            continue
        line: dict[str, Any] = {"benchmark": "env_families", "family": family, "env": env_id,
                                "kwargs": kwargs}
        try:
            env_factory(env_id, kwargs)().close()
        except (UserError, ImportError) as err:
            print(json.dumps({**line, "skipped": str(err).splitlines()[0]}), flush=True)
            continue
        ok, warnings = checked(env_id, kwargs)
        bare, ours = random_rates(env_id, kwargs, args.steps, args.rounds)
        line.update(check_ok=ok, check_warnings=warnings, bare_lean_loop_steps_per_s=round(bare, 1),
                    runner_random_steps_per_s=round(ours, 1), ratio=round(ours / bare, 3))
        if args.ippo_steps:
            line["ippo_train_env_steps_per_s"] = round(ippo_rate(env_id, kwargs, args.ippo_steps), 1)
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()

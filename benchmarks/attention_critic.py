"""MAPPO with an attention critic against the default MLP critic and random play, on one budget.

    python benchmarks/attention_critic.py [--steps 300000] [--episodes 100] [--seed 0]

Trains ``configs/mappo_attention_spread.yaml`` as it is (``critic_model.type: attention``) and
with ``algo.critic_model: null`` (the critic built as the actor is: an MLP over the agent's own
observation and the joint one), each for ``--steps`` env steps on ``--seed``, then scores each
run's greedy policy over ``--episodes`` episodes (``interplay eval``), beside a random policy's
score on the same episodes. Prints one JSON line: the mean episode return (sum over the agents)
of each, and each run's training seconds and env steps per second.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console

from interplay import evaluate, train
from interplay.config.loading import load

ROOT = Path(__file__).resolve().parent.parent
PRESET = ROOT / "configs" / "mappo_attention_spread.yaml"
QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


def score(run_dir: Path, episodes: int) -> float:
    return float(evaluate(run_dir, episodes=episodes, console=Console(quiet=True))["episode_return_mean"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    common = [*QUIET, f"train.steps={args.steps}", f"train.seed={args.seed}"]
    cases = {"attention": ([PRESET], common), "mlp": ([PRESET], [*common, "algo.critic_model=null"]),
             "random": ([], [*QUIET, "env.id=spread", "algo.name=random", "train.steps=1",
                             f"train.seed={args.seed}"])}
    out: dict[str, float | int | str] = {"env": "spread", "steps": args.steps, "seed": args.seed,
                                         "episodes": args.episodes}
    # The first optimiser a process builds imports torch's compiler (seconds): paid here, not by
    # whichever run is timed first.
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])
    with tempfile.TemporaryDirectory() as tmp:
        for name, (files, overrides) in cases.items():
            start = time.perf_counter()
            run_dir = Path(tmp) / name
            train(load(files, overrides), run_dir)
            if name != "random":
                seconds = time.perf_counter() - start
                out[f"{name}_train_s"] = round(seconds, 1)
                out[f"{name}_env_steps_per_s"] = round(args.steps / seconds)
            out[f"{name}_return"] = round(score(run_dir, args.episodes), 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

"""A learner on a random seat each episode (RLlib's per-episode ``policy_mapping_fn``) against
a random player, then judged greedy from each seat against random.

    python benchmarks/self_play_mapping.py [--env pettingzoo.classic.tictactoe_v3]
                                           [--algo dqn] [--steps 40000] [--games 200]

One JSON line: the learner's win/draw/loss rate per seat, beside a random player's on the same
seat (the baseline), and the share of episodes it played on each seat while training.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

from interplay.config.loading import load
from interplay.experiment.loop import Experiment
from interplay.experiment.versus import play_pair

SEATS: Counter = Counter()


def learner_on_a_random_seat(agent_id, episode, **kwargs):
    """RLlib's self-play mapping: the learner takes the seat whose id ends in an even or an odd
    digit, drawn for the episode."""
    if "parity" not in episode.user_data:
        episode.user_data["parity"] = int(episode.rng.integers(2))
    if int(agent_id[-1]) % 2 != episode.user_data["parity"]:
        return "rand"
    SEATS[agent_id] += 1
    return "main"


def rates(scores: list[float]) -> dict[str, float]:
    n = len(scores)
    return {"win": sum(s == 1.0 for s in scores) / n, "draw": sum(s == 0.5 for s in scores) / n,
            "loss": sum(s == 0.0 for s in scores) / n}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--env", default="pettingzoo.classic.tictactoe_v3")
    p.add_argument("--algo", default="dqn")
    p.add_argument("--steps", type=int, default=40_000)
    p.add_argument("--games", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    import self_play_mapping  # the module the run imports the mapping from (not __main__)

    counts = self_play_mapping.SEATS
    overrides = [f"env.id={args.env}", f"algo.name={args.algo}", f"train.steps={args.steps}",
                 f"train.seed={args.seed}", "env.num_envs=8", "log.console=false",
                 "log.tensorboard=false", "log.curve=false",
                 "train.policy_mapping_fn=self_play_mapping:learner_on_a_random_seat",
                 "policies.main.type=trainable", "policies.rand.type=random"]
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        exp = Experiment(load([], overrides), Path(tmp) / "run")
        seats = list(exp.env.agents)  # play_pair's order
        counts.clear()  # the episodes of training, not those the run was built with
        exp.run()
        wall = time.perf_counter() - start
        learned = play_pair(exp, "random", args.games, args.seed + 1)
        exp.close()
        fresh = Experiment(load([], overrides), Path(tmp) / "fresh")
        baseline = play_pair(fresh, "random", args.games, args.seed + 1)
        fresh.close()
    half = args.games // 2 + args.games % 2
    print(json.dumps({
        "benchmark": "self_play_mapping", "env": args.env, "algo": args.algo,
        "env_steps": args.steps, "seed": args.seed, "games_per_seat": args.games // 2,
        "train_s": round(wall, 1),
        "training_episodes_per_seat": {s: counts[s] for s in seats},
        "learner_vs_random": {seats[0]: rates(learned[:half]), seats[1]: rates(learned[half:])},
        "untrained_vs_random": {seats[0]: rates(baseline[:half]), seats[1]: rates(baseline[half:])},
    }), flush=True)


if __name__ == "__main__":
    main()

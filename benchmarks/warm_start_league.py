"""A connect four league started from a self-play run (``policies.shared.init_from``) begins at
its parent's strength; a fresh league begins at random play's.

    python benchmarks/warm_start_league.py                  # parent: 60k env steps of DQN
    python benchmarks/warm_start_league.py --steps 200000 --games 500

Trains the parent (configs/dqn_connect_four.yaml, self-play), then two leagues on its config
(``random`` in the pool) that learn nothing yet (``algo.learning_starts`` beyond their
steps), one warm-started from the parent and one fresh, and scores all three greedily against
random play and the scripted one-ply lookahead player, both seats equally (as ``interplay eval
RUN_DIR --vs`` does). Prints one JSON line: the win rates and their 95% intervals. (A greedy
untrained network already beats random play often in connect four: it keeps dropping into
the same columns; the one-ply player, which takes a winning move and blocks one, tells the
runs apart better.)
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from interplay.config.loading import load
from interplay.experiment.evaluate import evaluate
from interplay.experiment.loop import train

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "dqn_connect_four.yaml"
QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


OPPONENTS = {"random": "random", "one_ply": "interplay.envs.connect_four:one_ply"}


def _score(run: Path, games: int, seed: int) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, opponent in OPPONENTS.items():
        report = evaluate(run, episodes=games, vs=opponent, seed=seed, out=run / f"vs_{name}.json")
        out[f"win_rate_vs_{name}"] = report["win_rate"]
        out[f"win_ci95_vs_{name}"] = report["win_ci95"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60_000, help="the parent's env steps")
    parser.add_argument("--games", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        parent = root / "parent"
        train(load([CONFIG], [f"train.steps={args.steps}", f"train.seed={args.seed}", *QUIET]),
              parent)
        league = [f"train.seed={args.seed + 1}", "train.steps=2000", "league.snapshot_every=1000",
                  "league.fixed=[random]", "algo.learning_starts=1000000000", *QUIET]
        train(load([CONFIG], [*league, f"policies.shared.init_from={parent}"]), root / "child")
        train(load([CONFIG], league), root / "fresh")
        out = {"benchmark": "warm_start_league", "parent_env_steps": args.steps,
               "games": args.games}
        for name in ("parent", "child", "fresh"):
            out[name] = _score(root / name, args.games, args.seed)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

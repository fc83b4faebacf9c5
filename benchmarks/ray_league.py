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
import sys
from pathlib import Path

from ray_scaling import compare

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 16_000
COMMON = ["env.id=pettingzoo.classic.connect_four_v3", "env.num_envs=8", "train.self_play=true",
          "algo.name=ippo", "algo.rollout=64", "algo.epochs=2", "algo.minibatches=4",
          "algo.model.hidden=[64, 64]", f"league.snapshot_every={STEPS // 8}",
          "league.max_snapshots=4", "league.opponent_sampling=pfsp",
          "league.fixed=[random, 'interplay.envs.connect_four:one_ply']",
          f"train.steps={STEPS}", f"log.every={STEPS // 8}", "train.device=cpu",
          "train.test_frequency=-1", "log.console=false", "log.tensorboard=false",
          "log.curve=false", "checkpoint.at_end=false"]
def games(run: Path) -> int:
    """The games the league rated (its last line's members, those still in the pool)."""
    last = json.loads((run / "league.jsonl").read_text().splitlines()[-1])
    return sum(m["games"] for m in last["members"])


def main() -> None:
    compare("ray_league", COMMON, STEPS, lambda run, _result: {"games_in_pool": games(run)})


if __name__ == "__main__":
    main()

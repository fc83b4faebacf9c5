"""A self-play league on connect four, then a game against your agent in the terminal
(docs/tutorial_league.md).

    python examples/league_connect_four.py            # the preset: 2M env steps, over an hour on 2 cores
    python examples/league_connect_four.py --play     # then play it: type a column, 0 to 6
    python examples/league_connect_four.py --smoke    # a few seconds: every step, a tiny budget
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import interplay
from interplay.experiment.evaluate import evaluate
from interplay.population.league.report import league_report

ROOT = Path(__file__).resolve().parent.parent


def play(run: Path, moves: list[int] | None = None) -> float:
    """One game in the terminal: you are the first player, the agent the second. ``moves``
    stands in for your typing (the smoke run). Returns your reward."""
    from pettingzoo.classic import connect_four_v3

    agent = interplay.load_policy(run)
    env = connect_four_v3.env()
    env.reset(seed=0)
    typed = iter(moves) if moves is not None else None
    for seat in env.agent_iter():
        obs, reward, term, trunc, _ = env.last()
        if term or trunc:
            if seat == "player_0":
                print({1: "you won", 0: "a draw", -1: "the agent won"}[int(reward)])
                return float(reward)
            env.step(None)
            continue
        legal = np.flatnonzero(obs["action_mask"])
        if seat == "player_1":
            env.step(int(agent.act(obs)))
            continue
        board = obs["observation"][:, :, 0] - obs["observation"][:, :, 1]
        print("\n".join(" ".join(".XO"[int(v)] for v in row) for row in board), "\n0 1 2 3 4 5 6")
        move = -1
        while move not in legal:
            text = next(typed) if typed is not None else input(f"your column {list(legal)}: ")
            move = int(text) if str(text).strip().isdigit() else -1
            if typed is not None and move not in legal:
                move = int(legal[0])
        env.step(move)
    return 0.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="a tiny budget, to check it all runs")
    p.add_argument("--play", action="store_true", help="play a game against the agent after")
    p.add_argument("--run", default="runs/league_connect_four", help="the run folder")
    args = p.parse_args()
    over = ["log.console=false"]
    if args.smoke:
        over += ["train.steps=1200", "league.snapshot_every=400", "algo.rollout=16",
                 "env.num_envs=4", "log.every=400"]
    cfg = interplay.load_config([ROOT / "configs" / "league_connect_four.yaml"], overrides=over)
    run = Path(args.run)
    interplay.train(cfg, run, overwrite=True)
    league_report(run)
    for opponent, games in (("random", 500), ("interplay.envs.connect_four:two_ply", 200)):
        report = evaluate(run, episodes=20 if args.smoke else games, vs=opponent)
        print(f"against {opponent}: {report['win_rate']:.0%} won, {report['loss_rate']:.0%} lost")
    if args.smoke:
        play(run, moves=[3] * 42)
    elif args.play and sys.stdin.isatty():
        play(run)


if __name__ == "__main__":
    main()

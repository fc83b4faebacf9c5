"""How a trained connect four policy handles one-move tactics: played greedily against a
scripted player (``one_ply`` by default) from both seats, each of its moves is classed by
:func:`interplay.envs.toy.connect_four.move_kind` (a win it took or missed, a single threat it
blocked or missed, by the direction of the row, a piece that lets the other player win on top).

    python benchmarks/connect_four_tactics.py --run RUN_DIR
    python benchmarks/connect_four_tactics.py --run RUN_DIR/league/snapshot_401408.pt --games 100

Prints one JSON line: per seat the win/draw/loss rates; how often a win on the board was taken
and a single threat blocked (overall and per direction: ``h`` horizontal, ``v`` vertical, ``d``
and ``a`` the two diagonals), with the counts; and, for the games lost, what the policy's last
move before the loss was. Each game opens with ``--opening`` random legal moves (seeded), as
``interplay eval --vs ... --opening K`` does.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Callable

import numpy as np
from pettingzoo.classic import connect_four_v3

from interplay.envs.toy import connect_four
from interplay.experiment.policies import Policy, PolicyLoadError, load_policy


def play(policy: Policy, opponent: Callable[[dict, str], int], seat: str, game: int,
         opening: int, kinds: Counter) -> tuple[float, str | None]:
    """One game with ``policy`` on ``seat``: its reward and, if it lost, the kind of its last
    move; every move of the policy is tallied in ``kinds``."""
    env = connect_four_v3.env()
    env.reset(seed=game)
    rng = np.random.default_rng(game)
    moves, last_kind, outcome = 0, None, 0.0
    for agent in env.agent_iter():
        obs, reward, term, trunc, _ = env.last()
        if term or trunc:
            if agent == seat:
                outcome = float(reward)
            env.step(None)
            continue
        if moves < opening:
            action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        elif agent == seat:
            action = int(policy.act(obs))
            last_kind = connect_four.move_kind(obs, action)
            kinds[last_kind] += 1
        else:
            action = int(opponent(obs, agent))
        moves += 1
        env.step(action)
    env.close()
    return outcome, last_kind if outcome < 0 else None


def rates(kinds: Counter, good: str, bad: str) -> dict:
    """The share of the chances (``good`` plus ``bad`` moves) taken, overall and per suffix
    (the direction of the row, for blocks)."""
    took, missed = Counter(), Counter()
    for kind, n in kinds.items():
        for prefix, into in ((bad, missed), (good, took)):
            if kind.startswith(prefix):
                into[kind[len(prefix):].lstrip("_") or "all"] += n
                break
    out = {}
    for key in sorted(set(took) | set(missed)):
        chances = took[key] + missed[key]
        out[key] = {"rate": round(took[key] / chances, 3), "chances": chances}
    if "all" not in out and out:  # blocks: every direction together
        chances = sum(took.values()) + sum(missed.values())
        out["all"] = {"rate": round(sum(took.values()) / chances, 3), "chances": chances}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a run folder or a league snapshot file")
    parser.add_argument("--vs", default="one_ply",
                        choices=["one_ply", "two_ply", "center_one_ply", "center_two_ply"])
    parser.add_argument("--games", type=int, default=200, help="games per seat")
    parser.add_argument("--opening", type=int, default=2)
    args = parser.parse_args()
    try:
        policy = load_policy(args.run)
    except PolicyLoadError as err:
        parser.error(str(err))
    opponent = getattr(connect_four, args.vs)
    np.random.seed(0)  # the scripted players' random picks
    report = {}
    for seat in ("player_0", "player_1"):
        kinds: Counter = Counter()
        outcomes, lost_after = [], Counter()
        for game in range(args.games):
            outcome, kind = play(policy, opponent, seat, game, args.opening, kinds)
            outcomes.append(outcome)
            if kind is not None:
                lost_after[kind] += 1
        o = np.array(outcomes)
        report[seat] = {
            "win": round(float(np.mean(o > 0)), 3), "draw": round(float(np.mean(o == 0)), 3),
            "loss": round(float(np.mean(o < 0)), 3),
            "took_win": rates(kinds, "win", "missed_win"),
            "blocked": rates(kinds, "block_", "missed_block_"),
            "gave_win": kinds["gives_win"], "faced_two_threats": kinds["two_threats"],
            "lost_after": dict(lost_after.most_common())}
    print(json.dumps({"benchmark": "connect_four_tactics", "run": args.run, "vs": args.vs,
                      "games_per_seat": args.games, "opening": args.opening, **report}),
          flush=True)


if __name__ == "__main__":
    main()

"""A best response to a frozen policy: trained, then played greedily against it.

The piece that ``interplay exploit`` (:mod:`interplay.population.league.exploit`) and a league's
exploitability checks (:mod:`interplay.population.league.exploiters`) share. It is handed the class
that runs an experiment, so that the loop, which holds a league's checks, need not be
imported here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from interplay.config.loading import read
from interplay.config.schema import Config
from interplay.config.validation import validate
from interplay.errors import ConfigError
from interplay.experiment.run_store.run_folder import hold, start_afresh
from interplay.experiment.versus import play_versus


def best_response(experiment: Any, cfg: Config, pid: str, target: str, steps: int, games: int,
                  opening: int, seed: int, folder: Path, overrides: list[str] | None = None
                  ) -> dict[str, Any]:
    """Train a best response against the frozen ``target`` (a policy ``pid`` made by a run
    with config ``cfg``) in ``folder``, written afresh, with ``experiment`` (the loop's
    ``Experiment``); then ``games`` greedy games of it against ``target``: the report."""
    if steps < 1:
        raise ConfigError(f"interplay exploit: --steps must be at least 1, got {steps}")
    if games < 2:
        raise ConfigError(f"interplay exploit: --games must be at least 2 (one per seat), got "
                          f"{games}")
    if opening < 0:
        raise ConfigError(f"interplay exploit: --opening must be 0 or more moves, got {opening}")
    br_cfg = validate(read([], overrides or [], base=br_config(cfg, pid, target, steps, seed)))
    folder = Path(folder)
    with hold(folder):
        start_afresh(folder, overwrite=True)
        exp = experiment(br_cfg, folder)
        try:
            result = exp.run()
            agents = list(exp.env.agents)
            scored = (play_versus(br_cfg, agents, exp.specs, exp.eval_actors, target, games,
                                  seed, opening=opening) if len(agents) == 2 else None)
        finally:
            exp.close()
    report: dict[str, Any] = {"target": target, "steps": result.env_steps,
                              "best_response": str(folder), "env": str(br_cfg.env.id)}
    report["curve"] = curve(folder / "league.jsonl", target)
    if scored is not None:
        report["exploitability"] = scored["win_rate"]
        report.update({k: v for k, v in scored.items() if k != "vs"})
    else:  # teams: greedy games are for two players; its last training games say it
        report.update(late_games(report["curve"]))
        report["exploitability"] = report["win_rate"]
    return report


def late_games(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The best response's rates over the games of the last quarter of its curve's points
    (at least one), weighted by games."""
    late = points[-max(1, len(points) // 4):] if points else []
    n = sum(p["games"] for p in late)
    out: dict[str, Any] = {"episodes": n, "scored": "training games (with exploration)"}
    for k in ("win_rate", "draw_rate", "loss_rate"):
        out[k] = sum(p[k] * p["games"] for p in late) / n if n else 0.0
    return out


def br_config(cfg: Config, pid: str, target: str, steps: int, seed: int) -> dict[str, Any]:
    """The best response's config: the run's, with one fresh policy on every seat (``pid``'s
    own settings, if it had any) in a league whose only member is ``target``, stepped in this
    process."""
    data = cfg.model_dump(mode="json", by_alias=True)
    own = {k: v for k, v in data["policies"].get(pid, {}).items() if k != "agents"}
    data["policies"] = {pid: own}
    data["train"].update({"self_play": True, "policy_mapping_fn": None, "policies_to_train": None,
                          "steps": steps, "seed": seed, "target": None, "test_frequency": -1})
    league = data.get("league", {})
    data["league"] = {"snapshot_every": steps + 1, "max_snapshots": 1,
                      "opponent_sampling": "uniform", "fixed": [target],
                      "sides": league.get("sides"), "rating": league.get("rating", "elo")}
    data["log"].update({"console": False, "every": max(1, min(data["log"].get("every") or steps,
                                                                steps // 10 or 1))})
    data["backend"] = {"name": "local"}  # in this process, whichever backend trained the run
    # From the game's own start, whatever openings the run trained on: every run's policy is
    # measured by the same best response.
    data["env"]["opening"] = 0
    drop_teacher(data["algo"])  # it learns to beat the target on its own
    return data


def drop_teacher(algo: dict[str, Any]) -> None:
    """Take a teacher's settings (``teacher`` and every ``teacher_*``) out of an ``algo``
    section: a learner on its own."""
    for key in [k for k in algo if k == "teacher" or k.startswith("teacher_")]:
        del algo[key]


def curve(path: Path, member: str) -> list[dict[str, Any]]:
    """The best response's score against ``member`` in the games of each report interval."""
    if not path.is_file():
        return []
    before = [0, 0, 0]
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        now = next((m["learner_win_draw_loss"] for m in row["members"] if m["name"] == member),
                   before)
        d = [a - b for a, b in zip(now, before, strict=True)]
        n = sum(d)
        before = list(now)
        if n:
            out.append({"env_steps": row["env_steps"], "games": n, "win_rate": d[0] / n,
                        "draw_rate": d[1] / n, "loss_rate": d[2] / n})
    return out

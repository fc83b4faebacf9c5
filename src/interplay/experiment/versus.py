"""A trained policy against a fixed opponent in a two-player game: ``interplay eval --vs``.

The trained side plays each seat in half of the games (the first seat gets the odd one), greedy,
against a random player (``random``, legal actions only), a scripted one (``module:function``,
called as ``fn(observation, agent_id)`` with the env's own observation), one of its own
league's snapshots (``snapshot_<env steps>``), or a policy trained elsewhere, greedy too: a run
folder, a checkpoint folder or a snapshot file, each optionally ``:policy_id``. A game is won, drawn or
lost as the trained side's final return is positive, zero or negative; each rate comes with its
95% Wilson score interval.

Each seat's games are spread over the env copies with a fixed quota per copy, fixed before the
first game, so that short games (quick wins or quick losses) are not over-counted.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from interplay.config.schema import Config, PolicyConfig
from interplay.envs.spaces import same_space
from interplay.errors import ConfigError
from interplay.experiment.build import make_specs, make_vec_env
from interplay.experiment.openings import OpeningActor, Openings
from interplay.experiment.policies import frozen_actor
from interplay.experiment.run_store.run_folder import LEAGUE_FOLDER
from interplay.run.actors import Actor, RandomActor, ScriptedActor
from interplay.run.callbacks import CallbackList, Callbacks
from interplay.run.mapping import PolicySpec, load_callable
from interplay.run.runner import Runner
from interplay.seeding import rng_for

OUTCOMES = ("win", "draw", "loss")
# What ``play_versus`` adds to eval.json with ``--vs``, for the glossary (docs/metrics.md).
VERSUS_DOCS = {
    "vs": "the opponent: `random`, `module:function`, `snapshot_<env steps>` or a run "
          "folder, checkpoint or snapshot file (`[:policy_id]`)",
    "opening": "`--opening`: the first moves of each game drawn uniformly from the legal ones "
               "(the same draws for every opponent and seat at a given seed)",
    "policy/<seat>": "the trained policy that played that seat",
    "episodes/<seat>": "games the trained side played on that seat",
    "win_rate": "share of all games the trained side won (its return above 0)",
    "draw_rate": "share of games with a return of 0",
    "loss_rate": "share of games with a return below 0",
    "win_ci95": "the 95% Wilson score interval of win_rate, [low, high]",
    "draw_ci95": "the 95% Wilson score interval of draw_rate, [low, high]",
    "loss_ci95": "the 95% Wilson score interval of loss_rate, [low, high]",
    "return_mean": "the trained side's mean return",
    "win_rate/<seat>": "share of that seat's games won",
    "draw_rate/<seat>": "share of that seat's games drawn",
    "loss_rate/<seat>": "share of that seat's games lost",
    "win_ci95/<seat>": "the 95% Wilson score interval of that seat's win rate",
    "draw_ci95/<seat>": "the 95% Wilson score interval of that seat's draw rate",
    "loss_ci95/<seat>": "the 95% Wilson score interval of that seat's loss rate",
    "return_mean/<seat>": "the trained side's mean return on that seat",
}


def play_versus(cfg: Config, agents: list[str], specs: dict[str, PolicySpec],
                actors: dict[str, Actor], opponent: str, episodes: int, seed: int,
                env_id: Any = None, home: Path | None = None, opening: int = 0) -> dict[str, Any]:
    """Play ``episodes`` greedy games of the trained policies against ``opponent``; the rates.

    ``agents`` are the seats in the env's order, ``specs`` and ``actors`` the run's policies,
    ``home`` its run folder (where ``snapshot_<env steps>`` is looked for). The first
    ``opening`` moves of each game are random legal ones (:mod:`interplay.experiment.openings`).
    """
    check_opponent(opponent)
    if len(agents) != 2:
        raise ConfigError(f"--vs is for two-player games; this env has agents {agents}")
    if episodes < 2:
        raise ConfigError(f"--vs plays each seat: --episodes must be at least 2, got {episodes}")
    if opening < 0:
        raise ConfigError(f"--opening must be 0 or more moves, got {opening}")
    opponent = _own_snapshot(opponent, home)
    opp_id = "opponent"
    while opp_id in specs:
        opp_id += "_"
    report: dict[str, Any] = {"vs": opponent, "opening": opening}
    results: list[np.ndarray] = []
    for i, seat in enumerate(agents):
        pid = _trained_on(seat, specs)
        n = episodes // 2 + (i < episodes % 2)
        mapping = {
            pid: specs[pid].config.model_copy(update={"agents": [seat]}),
            opp_id: _opponent_config(opponent, agents[1 - i]),
        }
        returns = _play(cfg, mapping, pid, opp_id, specs[pid], actors[pid], opponent, seat, n,
                        seed, env_id, opening=opening)
        results.append(returns)
        report[f"policy/{seat}"] = pid
        report[f"episodes/{seat}"] = n
        report.update({f"{k}/{seat}": v for k, v in _rates(returns).items()})
    every = np.concatenate(results)
    report["episodes"] = len(every)
    report.update(_rates(every))
    return report


OPPONENTS = ("random, module:function, snapshot_<env steps> (of this run's league), or "
             "another RUN_DIR[:policy_id], checkpoint or snapshot file")
"""What ``--vs`` takes, for its errors."""


def check_opponent(opponent: Any) -> None:
    """Refuse an opponent that names nothing (empty, blank, not text) before any work."""
    if not isinstance(opponent, str) or not opponent.strip():
        raise ConfigError(f"--vs: {opponent!r} names no opponent; give {OPPONENTS}")


def _trained_on(seat: str, specs: dict[str, PolicySpec]) -> str:
    """The policy that plays ``seat`` for the trained side: its own if trained, else the only one."""
    own = next(pid for pid, s in specs.items() if seat in s.agents)
    if specs[own].trainable:
        return own
    trained = [pid for pid, s in specs.items() if s.trainable]
    if len(trained) != 1:
        raise ConfigError(
            f"--vs: seat {seat!r} was played by the {specs[own].config.type} policy {own!r} and "
            f"the run trained {len(trained)} policies {trained}; nothing to put on that seat"
        )
    return trained[0]


def _own_snapshot(opponent: str, home: Path | None) -> str:
    """``snapshot_<env steps>`` as the path of that snapshot in ``home``'s league; anything
    else as it is."""
    if home is None or not re.fullmatch(r"snapshot_\d+", opponent):
        return opponent
    folder = home / LEAGUE_FOLDER
    path = folder / f"{opponent}.pt"
    if not path.is_file():
        kept = sorted((f.stem for f in folder.glob("snapshot_*.pt")),
                      key=lambda name: int(name.rpartition("_")[2]))
        raise ConfigError(f"--vs: {home} has no league snapshot {opponent!r}; its league keeps "
                          f"{kept or 'none'}")
    return str(path)


def _is_path(opponent: str) -> bool:
    """Whether ``opponent`` names a run, checkpoint or snapshot (``[:policy_id]``)."""
    return Path(opponent).exists() or (":" in opponent
                                       and Path(opponent.rpartition(":")[0]).exists())


def _opponent_config(opponent: str, seat: str) -> PolicyConfig:
    if opponent == "random":
        return PolicyConfig(type="random", agents=[seat])
    if _is_path(opponent):
        try:
            return PolicyConfig.model_validate({"type": "frozen", "from": opponent,
                                                "agents": [seat]})
        except ValidationError as err:
            raise ConfigError(f"--vs: {opponent!r}: {err.errors()[0]['msg']}; give "
                              f"{OPPONENTS}") from None
    if "/" in opponent or opponent.endswith(".pt"):
        raise ConfigError(f"--vs: {opponent!r}: no such run folder, checkpoint or snapshot file")
    load_callable(opponent, "--vs")  # fails early, naming the option
    return PolicyConfig(type="scripted", fn=opponent, agents=[seat])


def play_pair(a: Any, b: Any, games: int, seed: int) -> list[float]:
    """``games`` greedy games of experiment ``a``'s trained policy against ``b``: another
    experiment's trained policy, or ``random`` / ``module:function``; ``a`` plays each seat in
    half of them. Each game's score for ``a``: 1 won, 0.5 drawn, 0 lost."""
    agents = list(a.env.agents)
    if len(agents) != 2:
        raise ConfigError(f"hpo.fitness: rating is for two-player games; this env has agents "
                          f"{agents}")
    scores: list[float] = []
    for i, seat in enumerate(agents):
        pid = _trained_on(seat, a.specs)
        other = agents[1 - i]
        opponent = b if isinstance(b, str) else "random"
        mapping = {pid: a.specs[pid].config.model_copy(update={"agents": [seat]}),
                   "opponent": _opponent_config(opponent, other)}
        opp_actor = None
        if not isinstance(b, str):
            opp_actor = b.eval_actors[_trained_on(other, b.specs)]
        n = games // 2 + (i < games % 2)
        returns = _play(a.cfg, mapping, pid, "opponent", a.specs[pid], a.eval_actors[pid], opponent,
                        seat, n, seed, None, opp_actor)
        scores += [1.0 if r > 0 else 0.5 if r == 0 else 0.0 for r in returns.tolist()]
    return scores


def _play(cfg: Config, mapping: dict[str, PolicyConfig], pid: str, opp_id: str,
          trained: PolicySpec, actor: Actor, opponent: str, seat: str, n: int, seed: int,
          env_id: Any, opp_actor: Actor | None = None, opening: int = 0) -> np.ndarray:
    """The trained side's final returns on ``seat`` over ``n`` games, the first ``opening``
    moves of each drawn at random."""
    train = cfg.train.model_copy(update={"self_play": False, "policy_mapping_fn": None})
    seat_cfg = cfg.model_copy(update={"policies": mapping, "train": train})
    num_envs = min(cfg.env.num_envs, n)
    env, copies = make_vec_env(seat_cfg, num_envs=num_envs, env_id=env_id, keep_state=False)
    try:
        specs = make_specs(seat_cfg, env)
        for kind in ("obs_space", "action_space"):
            if not same_space(getattr(specs[pid], kind), getattr(trained, kind)):
                raise ConfigError(
                    f"--vs: policy {pid!r} was made for {getattr(trained, kind)} but seat "
                    f"{seat!r} has {getattr(specs[pid], kind)}"
                )
        opp_spec = specs[opp_id]
        opp: Actor
        if opp_actor is not None:
            opp = opp_actor
        elif opponent == "random":
            opp = RandomActor(opp_spec, rng_for(seed, "vs", "random", seat))
        elif opp_spec.config.type == "frozen":
            opp = frozen_actor(opp_spec, opponent, "--vs")
        else:
            opp = ScriptedActor(opp_spec, load_callable(opponent, "--vs"), legal_only=True)
        quota = [n // num_envs + (e < n % num_envs) for e in range(num_envs)]
        record = _Outcomes(seat, quota)
        players: dict[str, Actor] = {pid: actor, opp_id: opp}
        hooks: list[Callbacks] = [record]
        if opening:
            openings = Openings(opening, seed, [sum(quota[:e]) for e in range(num_envs)])
            players = {p: OpeningActor(a, specs[p], openings) for p, a in players.items()}
            hooks.insert(0, openings)
        runner = Runner(env, specs, players, set(), CallbackList(hooks), copies)
        runner.reset(int(rng_for(seed, "vs", seat).integers(2**31 - 1)))
        while not record.done():
            runner.step(explore=False)
    finally:
        env.close()
    return np.concatenate([np.asarray(r, np.float64) for r in record.returns])


class _Outcomes(Callbacks):
    """The first ``quota[e]`` final returns of ``seat`` in each copy ``e``."""

    def __init__(self, seat: str, quota: list[int]):
        self.seat = seat
        self.quota = quota
        self.returns: list[list[float]] = [[] for _ in quota]

    def on_episode_end(self, *, episode: Any, env_index: int, runner: Any) -> None:
        got = self.returns[env_index]
        if len(got) < self.quota[env_index]:
            got.append(episode.returns.get(self.seat, 0.0))

    def done(self) -> bool:
        return all(len(r) >= q for r, q in zip(self.returns, self.quota, strict=True))


def _rates(returns: np.ndarray) -> dict[str, Any]:
    """Win, draw and loss rates, each with its 95% Wilson score interval, and the mean return."""
    from scipy.stats import binomtest  # a second to import: only where games are scored

    n = len(returns)
    out: dict[str, Any] = {}
    for outcome, count in zip(OUTCOMES, ((returns > 0).sum(), (returns == 0).sum(),
                                         (returns < 0).sum()), strict=True):
        out[f"{outcome}_rate"] = float(count / max(n, 1))
        if n:
            ci = binomtest(int(count), n).proportion_ci(confidence_level=0.95, method="wilson")
            out[f"{outcome}_ci95"] = [round(float(ci.low), 4), round(float(ci.high), 4)]
    out["return_mean"] = float(returns.mean()) if n else 0.0
    return out


def _cell(report: dict[str, Any], outcome: str, suffix: str = "") -> str:
    rate = f"{report[f'{outcome}_rate{suffix}']:.1%}"
    ci = report.get(f"{outcome}_ci95{suffix}")
    return rate if ci is None else f"{rate} ({ci[0]:.1%}–{ci[1]:.1%})"


def print_versus(report: dict[str, Any], console: Console) -> None:
    opening = report.get("opening", 0)
    table = Table(title=f"vs {report['vs']} on {report['env']} over {report['episodes']} games, "
                        "greedy" + (f", {opening} random opening moves" if opening else ""))
    for name in ("trained side", "policy", "games", "win", "draw", "loss"):
        table.add_column(name, justify="left" if name in ("trained side", "policy") else "right")
    seats = [k.split("/", 1)[1] for k in report if k.startswith("episodes/")]
    for seat in seats:
        table.add_row(f"on seat {seat}", report[f"policy/{seat}"], str(report[f"episodes/{seat}"]),
                      *(_cell(report, o, f"/{seat}") for o in OUTCOMES))
    table.add_row("both seats", "", str(report["episodes"]), *(_cell(report, o) for o in OUTCOMES))
    console.print(table)

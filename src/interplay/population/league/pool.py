"""Self-play leagues: frozen snapshots of the learner as opponents, matchmaking, ratings.

The learner is the run's one trained policy, on every seat (self-play mapping). The env's
agents form sides (``league.sides``; by default each agent is one side, as in two-player
games; teams list several agents per side). At each episode start, in each env copy, the
learner takes one side at random and one pool member, sampled by ``league.opponent_sampling``,
plays all the others. Rows the members play are marked (``league_opponent``) and never
learned from. Every ``league.snapshot_every`` env steps the learner's whole algorithm state
is written to ``league/<name>.pt`` (atomically; a snapshot never changes) and joins the pool,
at most ``league.max_snapshots`` of them (the oldest leaves: it plays out the games it is in,
and its file is deleted once no checkpoint of the run names it). ``league.fixed`` members
(``random``, ``module:function``, ``RUN_DIR[:policy_id]``) stay in the pool; a resume with
another ``league.fixed`` drops the members no longer listed (their games so far stay in
``league.jsonl``) and adds the new ones at the initial rating.

Every finished training episode is a game between the learner and its member: won, drawn or
lost as the learner's side's return is above, equal to or below the best other side's. Ratings
of every member and of the learner (Elo, or OpenSkill's: ``league.rating``) follow from the
games; reports carry
``rating/<member>``, ``league.jsonl`` gets one line per report, and ``interplay league
RUN_DIR`` prints the table and draws ``ratings.png``. The pool, ratings, results and sampler
are part of the checkpoint (the callbacks' state), so a resumed league goes on exactly, from
any checkpoint: ``league.jsonl`` loses the lines written after it.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from interplay.backends.ray.env_runner import num_copies
from interplay.config.code import names_code
from interplay.config.schema import Config, LeagueConfig
from interplay.errors import ConfigError, WriteError
from interplay.experiment.attach import Attachment
from interplay.experiment.openings import rows_of
from interplay.experiment.policies import FrozenActor, frozen_actor, snapshot_state
from interplay.experiment.run_store.checkpoint import checkpoint_steps
from interplay.experiment.run_store.run_folder import LEAGUE_FOLDER as FOLDER
from interplay.experiment.run_store.statecodec import encode
from interplay.population.ratings import Elo, OpenSkill, Rater
from interplay.run.actors import ActBatch, Actor, RandomActor, ScriptedActor, declared
from interplay.run.mapping import load_callable
from interplay.run.transitions import Transitions
from interplay.seeding import rng_for

LEARNER = "learner"
OPENING_GAMES = 50  # games whose returns tell a cooperative env
LEAGUE_DOCS = {  # what a league adds to every report (docs/metrics.md)
    "rating/<member>": "the rating (Elo, or OpenSkill's by `league.rating`) of the learner (`rating/learner`) and of each pool member "
                       "(`random`, a scripted player, `snapshot_<env steps>`, a frozen policy) "
                       "after every game so far; `interplay league RUN_DIR` tabulates them",
}


@dataclass
class Member:
    name: str
    kind: str  # snapshot | random | scripted | frozen | exploiter (an exploiter's: pool, main)
    env_steps: int  # when the snapshot was taken (0 for fixed members)
    actor: Actor
    file: str | None = None
    recurrent_state: dict[str, np.ndarray] = field(default_factory=dict)
    algo: Any = None  # a snapshot's own algorithm (its sampling RNGs move on as it plays)
    retired: bool = False  # out of the pool: it plays out the games it is in, then goes


class Seats(Protocol):
    """Who plays where: each copy's member (an index into ``members``) and learner's side."""

    side_of: np.ndarray
    learner_side: np.ndarray
    assign: np.ndarray
    mirror: np.ndarray  # copies whose episode the learner plays against itself, on every side
    members: list[Member]


class LeagueActor:
    """Acts for the learner's policy: the learner on its side, each copy's member elsewhere."""

    def __init__(self, league: Seats, learner: Actor):
        self.league = league
        self.learner = learner
        self.squashed = declared(learner, "squashed")
        self.wants_env_obs = False
        self.reads_env_obs_for(league.members)

    def reads_env_obs_for(self, members: list[Member]) -> None:
        """Ask for the env's own observations where the learner (to show its teacher) or one of
        ``members`` (a scripted one, like scripted policies) reads them."""
        self.wants_env_obs = declared(self.learner, "wants_env_obs") or any(
            declared(m.actor, "wants_env_obs") for m in members)

    def act(self, batch: ActBatch, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        lg = self.league
        n = batch.obs.shape[0]
        env = batch.env if batch.env is not None else np.zeros(n, np.int64)
        slot = batch.slot if batch.slot is not None else np.zeros(n, np.int64)
        theirs = (lg.side_of[slot] != lg.learner_side[env]) & ~lg.mirror[env]
        mine = ~theirs
        action: np.ndarray | None = None
        extras: dict[str, np.ndarray] = {}
        if mine.any():
            a, ex = self.learner.act(rows_of(batch, mine), explore)
            action = np.zeros((n, *a.shape[1:]), a.dtype)
            action[mine] = a
            for k, v in ex.items():
                extras[k] = np.zeros((n, *v.shape[1:]), v.dtype)
                extras[k][mine] = v
        for m in np.unique(lg.assign[env[theirs]]):
            rows = theirs & (lg.assign[env] == m)
            member = lg.members[int(m)]
            sub = rows_of(batch, rows)
            sub.recurrent_state = member.recurrent_state
            a, _ = member.actor.act(sub, explore)
            if action is None:
                action = np.zeros((n, *a.shape[1:]), a.dtype)
            action[rows] = a
        extras["league_opponent"] = theirs
        assert action is not None
        return action, extras


def _rngs(state: Any) -> Any:
    """Only the RNG states in an algorithm's state (keys naming an ``rng``)."""
    if not isinstance(state, dict):
        return None
    out = {}
    for key, value in state.items():
        if "rng" in str(key):
            out[key] = copy.deepcopy(value)
        else:
            inner = _rngs(value)
            if inner:
                out[key] = inner
    return out


def _merged(base: Any, over: Any) -> Any:
    if not isinstance(base, dict) or not isinstance(over, dict):
        return over
    return {**base, **{k: _merged(base.get(k), v) for k, v in over.items()}}


def without_league_rows(batch: Transitions, keep_members: bool = False) -> Transitions:
    """The learner's own transitions (with ``keep_members``, the members' too), without the
    league's mark on them."""
    played = batch.extras["league_opponent"]
    kept = batch.select(~played) if played.any() and not keep_members else batch
    kept.extras = {k: v for k, v in kept.extras.items() if k != "league_opponent"}
    return kept


def draw(settings: LeagueConfig, rng: np.random.Generator, pool: list[Member],
         results: dict[str, list[int]]) -> int:
    """The position in ``pool`` of the member one episode is played against, by
    ``league.opponent_sampling`` (``results``: the learner's wins, draws, losses by member)."""
    how = settings.opponent_sampling
    if how == "latest":
        snaps = [i for i, m in enumerate(pool) if m.kind == "snapshot"]
        return snaps[-1] if snaps else int(rng.integers(len(pool)))
    if how == "uniform":
        return int(rng.integers(len(pool)))
    # Prioritised fictitious self-play: members the learner does worse against come more.
    weights = np.array([_hardness(settings, results.get(m.name, [0, 0, 0])) for m in pool])
    return int(rng.choice(len(pool), p=weights / weights.sum()))


def new_game(settings: LeagueConfig, rng: np.random.Generator, pool: list[Member],
             results: dict[str, list[int]], by_side: dict[str, list[list[int]]],
             n_sides: int) -> tuple[bool, int, int]:
    """A new episode's draws, in the one order every league makes them (here and in each Ray
    runner, so that one runner plays the local league number for number): whether the
    learner plays itself (``league.against_self``; nothing drawn when it never does), the
    position in ``pool`` of its member (drawn either way, so that every copy names one), and
    the learner's side (with ``league.pfsp_sides``, drawn with the member as one pair by the
    learner's results on each side, ``by_side``)."""
    mirror = bool(settings.against_self) and bool(rng.random() < settings.against_self)
    if settings.pfsp_sides:
        none = [0, 0, 0]
        weights = np.array([_hardness(settings, by_side.get(m.name, [none] * n_sides)[side])
                            for m in pool for side in range(n_sides)])
        pair = int(rng.choice(len(weights), p=weights / weights.sum()))
        return mirror, pair // n_sides, pair % n_sides
    member = draw(settings, rng, pool, results)
    return mirror, member, int(rng.integers(n_sides))


def book(results: dict[str, list[int]], by_side: dict[str, list[list[int]]], name: str,
         side: int, slot: int, n_sides: int) -> None:
    """Count a game of the learner on ``side`` against member ``name`` (``slot``: 0 won, 1
    drawn, 2 lost) in its results over both sides and in those of its side."""
    results.setdefault(name, [0, 0, 0])[slot] += 1
    by_side.setdefault(name, [[0, 0, 0] for _ in range(n_sides)])[side][slot] += 1


def _hardness(settings: LeagueConfig, result: list[int]) -> float:
    w, d, losses = result
    games = w + d + losses
    score = (w + 0.5 * d + 1.0) / (games + 2.0)  # the learner's score, shrunk towards 1/2
    if settings.pfsp_weighting == "variance":
        return score * (1.0 - score) + 1e-3
    return (1.0 - score) ** settings.pfsp_power + 1e-3


def side_totals(returns: dict[str, float], agents: tuple[str, ...] | list[str],
                side_of: np.ndarray, n_sides: int) -> np.ndarray:
    """Each side's return in one episode."""
    totals = np.zeros(n_sides)
    for j, agent in enumerate(agents):
        totals[side_of[j]] += returns.get(agent, 0.0)
    return totals


def outcome(totals: np.ndarray, side: int) -> int:
    """The learner's game on ``side``: 0 won, 1 drawn, 2 lost (its slot in the results), as
    its side's return is above, equal to or below the best other side's."""
    mine, best_other = totals[side], np.delete(totals, side).max()
    return 0 if mine > best_other else 1 if mine == best_other else 2


def fixed_member(entry: str, spec: Any, seed: int) -> Member:
    """A ``league.fixed`` member: ``random``, a scripted player or a frozen policy."""
    if entry == "random":
        return Member("random", "random", 0, RandomActor(spec, rng_for(seed, "league", "random")))
    if names_code(entry):
        fn = load_callable(entry, "league.fixed")
        return Member(entry, "scripted", 0, ScriptedActor(spec, fn, legal_only=True))
    return Member(entry, "frozen", 0, frozen_actor(spec, entry, "league.fixed"))


def frozen_algo(cfg: Config, specs: dict[str, Any], env_facts: tuple[bool, Any], pid: str,
                state: dict[str, Any]) -> tuple[Actor, Any]:
    """A snapshot's actor and algorithm, from its state (``env_facts``: whether the env is
    turn-based, and the global state it keeps)."""
    from interplay.experiment.build import make_algorithms
    algo = make_algorithms(cfg, specs, "cpu", *env_facts)
    algo.load_state_dict(state)
    return FrozenActor(algo.actor(pid), explore=True), algo


class League(Attachment):
    def __init__(self, cfg: Config, exp: Any):
        lg = cfg.league
        self.settings = lg
        self.exp = exp
        self.cfg = cfg
        if any(s.mapping is not None for s in exp.specs.values()):
            raise ConfigError(
                "league: train.policy_mapping_fn chooses the policies per episode, and so does "
                "the league (its opponents); keep one: a league maps its learner to every seat")
        trained = [p for p, s in exp.specs.items() if s.trainable]
        agents = list(exp.env.agents)
        if len(trained) != 1 or set(exp.specs[trained[0]].agents) != set(agents):
            raise ConfigError(
                "league: the learner must be one trained policy on every seat (self-play: "
                f"train.self_play: true, or one policy for all agents); this run maps {agents} "
                f"to {[(p, list(s.agents)) for p, s in exp.specs.items()]}")
        self.pid = trained[0]
        if lg.learn_from_members and not exp.algo.of(self.pid).learns_from_members:
            raise ConfigError(
                f"league.learn_from_members: algo.name {cfg.algo.name!r} learns only from its "
                "own play (on-policy); use an off-policy algorithm (dqn, isac) or set it false")
        spec = exp.specs[self.pid]
        sides = lg.sides or [[a] for a in agents]
        self.side_of = np.full(len(spec.agents), -1)
        for i, patterns in enumerate(sides):
            for j, agent in enumerate(spec.agents):
                if any(fnmatch.fnmatchcase(agent, p) for p in patterns):
                    if self.side_of[j] >= 0:
                        raise ConfigError(f"league.sides: agent {agent!r} is on two sides")
                    self.side_of[j] = i
        if (self.side_of < 0).any():
            missing = [a for a, s in zip(spec.agents, self.side_of, strict=True) if s < 0]
            raise ConfigError(f"league.sides: agents {missing} are on no side")
        self.n_sides = len(sides)
        if self.n_sides < 2:
            raise ConfigError("league.sides: a league needs at least two sides")
        E = num_copies(cfg)  # (on Ray the env here is a probe of one copy)
        self.remote = cfg.backend.name == "ray"  # members act in the env runners
        from interplay.experiment.build import env_state_space
        self.env_facts = (exp.env.turn_based, env_state_space(exp.env))
        self.rng = rng_for(cfg.train.seed, "league")
        self.assign = np.zeros(E, np.int64)
        self.learner_side = np.zeros(E, np.int64)
        self.members: list[Member] = []
        self.rater: Rater = Elo(lg.elo_k) if lg.rating == "elo" else OpenSkill()
        self.skill: dict[str, list[float]] = {LEARNER: self.rater.new()}
        self.results: dict[str, list[int]] = {}  # member -> [learner wins, draws, losses]
        self.by_side: dict[str, list[list[int]]] = {}  # member -> those on each side
        self.next_snapshot = 0
        self.void = np.zeros(E, bool)  # games left unrated: their member left league.fixed
        self.mirror = np.zeros(E, bool)  # episodes of the learner against itself
        self.games_against_self = 0
        # Snapshot files out of the pool, kept while a checkpoint may name them: each with the
        # env steps from its snapshot to its leaving (the checkpoints between hold it).
        self.pending: list[dict[str, Any]] = []
        self.logged = 0  # lines of league.jsonl written so far
        self.opening: list[list[float]] = []  # the sides' returns in the first games
        self.folder = Path(exp.run_dir) / FOLDER
        for leftover in self.folder.glob("snapshot_*.tmp"):  # of a write that was killed
            leftover.unlink(missing_ok=True)
        for entry in lg.fixed:
            self._add(self._fixed(entry, spec))
        # On Ray the learner's actor stays as it is: runners act with theirs, each wrapped there.
        self.actor: Any = None if self.remote else exp.wrap_actor(
            self.pid, lambda learner: LeagueActor(self, learner))
        self._scripted_obs()
        self.restores = 0  # times a checkpoint's seats came back (Ray runners then take them)
        self.log_extras: list[Any] = []
        # Members of other kinds that other parts of the league put back on resume, by kind
        # (an exploiter's league: the main learner, its copies of the main pool).
        self.restorers: dict[str, Callable[[dict[str, Any]], Member]] = {}

    # -- the pool ----------------------------------------------------------------------------
    def _fixed(self, entry: str, spec: Any) -> Member:
        return fixed_member(entry, spec, self.cfg.train.seed)

    def _scripted_obs(self) -> None:
        """Scripted members are handed the env's own observations, like scripted policies."""
        if self.actor is not None:
            self.actor.reads_env_obs_for(self.members)

    def _add(self, member: Member) -> None:
        self.members.append(member)
        self.skill.setdefault(member.name, self.rater.new())
        self.results.setdefault(member.name, [0, 0, 0])

    def _pool(self) -> list[int]:
        """The members episodes are drawn from (by index): all but the retired ones."""
        return [i for i, m in enumerate(self.members) if not m.retired]

    def snapshot(self, env_steps: int) -> None:
        """Freeze the learner as it is now into the pool (and on disk)."""
        name = f"snapshot_{env_steps}"
        path = self.folder / f"{name}.pt"
        state = copy.deepcopy(self.exp.algo.frozen_state())
        self._write(path, state)
        actor, algo = self._frozen(state)
        self._add(Member(name, "snapshot", env_steps, actor, path.name, algo=algo))
        self._retire_oldest(env_steps)

    def _retire_oldest(self, env_steps: int) -> None:
        """Retire the oldest snapshots beyond ``league.max_snapshots``."""
        snaps = [m for m in self.members if m.kind == "snapshot" and not m.retired]
        for old in snaps[:max(0, len(snaps) - self.settings.max_snapshots)]:
            old.retired = True
        self._drop_idle(env_steps)

    def _write(self, path: Path, state: dict[str, Any]) -> None:
        tmp = path.with_suffix(".tmp")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as fh:
                torch.save(encode(state, "league snapshot"), fh)
                fh.flush()
                os.fsync(fh.fileno())
            tmp.replace(path)
        except (OSError, RuntimeError) as err:  # torch reports a failed write as RuntimeError
            tmp.unlink(missing_ok=True)
            raise WriteError.of(path, err if isinstance(err, OSError) else OSError(str(err)),
                                "the snapshots and checkpoints written before are intact"
                                ) from err

    def _drop_idle(self, env_steps: int) -> None:
        """Take the retired members that play no game any more out of the league."""
        for index in reversed(range(len(self.members))):
            member = self.members[index]
            if not member.retired or (self.assign == index).any():
                continue
            self.members.pop(index)
            self.assign[self.assign > index] -= 1
            if member.file:  # a snapshot joined at its env steps; a frozen exploiter's are
                # its own, not the run's: it is kept for every checkpoint before it left
                joined = member.env_steps if member.kind == "snapshot" else 0
                self.pending.append({"file": member.file, "from": joined, "to": env_steps})

    def checkpointed(self, run_dir: Path) -> None:
        """Delete the snapshot files out of the pool that none of the run's checkpoints names:
        one taken while the snapshot was in the league."""
        steps = checkpoint_steps(run_dir)
        kept = []
        for entry in self.pending:
            if any(entry["from"] <= step <= entry["to"] for step in steps):
                kept.append(entry)
            elif Path(entry["file"]).name == entry["file"]:
                (self.folder / entry["file"]).unlink(missing_ok=True)
        self.pending = kept

    def _frozen(self, state: dict[str, Any]) -> tuple[Actor, Any]:
        return frozen_algo(self.cfg, self.exp.specs, self.env_facts, self.pid, state)

    def sample(self) -> int:
        """A member for one episode, by ``league.opponent_sampling``."""
        pool = self._pool()
        return pool[draw(self.settings, self.rng, [self.members[i] for i in pool], self.results)]

    # -- callbacks ------------------------------------------------------------------------------
    def on_episode_start(self, *, episode: Any, env_index: int, runner: Any) -> None:
        if runner is not self.exp.runner:
            return
        if not self._pool():
            self.snapshot(runner.env_steps)
        pool = self._pool()
        mirror, i, side = new_game(self.settings, self.rng, [self.members[j] for j in pool],
                                   self.results, self.by_side, self.n_sides)
        self.mirror[env_index], self.assign[env_index] = mirror, pool[i]
        self.learner_side[env_index], self.void[env_index] = side, False
        self._drop_idle(runner.env_steps)

    def on_episode_end(self, *, episode: Any, env_index: int, runner: Any) -> None:
        if runner is not self.exp.runner or self.void[env_index]:
            return
        if self.mirror[env_index]:
            self.games_against_self += 1
            return
        totals = side_totals(episode.returns, self.exp.specs[self.pid].agents, self.side_of,
                             self.n_sides)
        self.rate(self.members[int(self.assign[env_index])].name, totals,
                  int(self.learner_side[env_index]))

    def rate(self, name: str, totals: np.ndarray, side: int) -> int:
        """Book a game against member ``name`` whose sides returned ``totals``, the learner
        on ``side``; its outcome (0 won, 1 drawn, 2 lost)."""
        slot = outcome(totals, side)
        self._watch_for_cooperation(totals)
        book(self.results, self.by_side, name, side, slot, self.n_sides)
        self.skill[LEARNER], self.skill[name] = self.rater.update(
            self.skill[LEARNER], self.skill.setdefault(name, self.rater.new()),
            1.0 - 0.5 * slot)
        return slot

    def on_sample_end(self, *, runner: Any, env_steps: int) -> None:
        every = self.settings.snapshot_every
        if runner is self.exp.runner and env_steps >= self.next_snapshot + every and every > 0:
            self.next_snapshot = env_steps - env_steps % every
            self.snapshot(env_steps)

    def _watch_for_cooperation(self, totals: np.ndarray) -> None:
        """Warn once when in the first games the sides' returns rose and fell together: the
        env rewards its sides together (a cooperative env), and a league rates nothing."""
        if len(self.opening) >= OPENING_GAMES:
            return
        self.opening.append(totals.tolist())
        if len(self.opening) < OPENING_GAMES:
            return
        returns = np.array(self.opening)
        spread = returns.std(axis=0)
        if (spread == 0).all():  # every game the same: together if the sides' returns are
            together = bool((returns[0] == returns[0, 0]).all() and returns[0, 0] != 0)
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                corr = np.corrcoef(returns.T)
            together = bool((np.nan_to_num(corr, nan=0.0) > 0.9).all())
        if together:
            warnings.warn(
                f"league: in the first {OPENING_GAMES} games the sides' returns went up and "
                "down together (the env rewards its sides together: a cooperative env?), so "
                "the wins, losses and ratings say little. A league is for sides that compete "
                "(league.sides)", LeagueWarning, stacklevel=2)

    # -- reports --------------------------------------------------------------------------------
    @property
    def ratings(self) -> dict[str, float]:
        """Each player's rating as shown: Elo's, or OpenSkill's cautious estimate."""
        return {name: self.rater.shown(s) for name, s in self.skill.items()}

    def rating_metrics(self) -> dict[str, float]:
        shown = self.ratings
        out = {f"rating/{LEARNER}": round(shown[LEARNER], 2)}
        out.update({f"rating/{m.name}": round(shown[m.name], 2) for m in self.members
                    if not m.retired})
        return out

    def kept(self, pid: str, batch: Transitions) -> Transitions:
        if "league_opponent" not in batch.extras:  # rows a league member played
            return batch
        return without_league_rows(batch, self.settings.learn_from_members)

    def report(self, env_steps: int) -> dict[str, Any]:
        """The ratings for the train row; ``league.jsonl`` gets its line."""
        out = self.rating_metrics()
        self.log(env_steps)
        return out

    def log(self, env_steps: int) -> None:
        line = {"env_steps": env_steps, "ratings": {k: round(v, 2) for k, v in self.ratings.items()},
                "members": [{"name": m.name, "kind": m.kind, "env_steps": m.env_steps,
                             "games": sum(self.results[m.name]),
                             "learner_win_draw_loss": self.results[m.name],
                             "by_side": self.by_side.get(m.name, [])}
                            for m in self.members if not m.retired]}
        if self.settings.against_self:
            line["games_against_self"] = self.games_against_self
        for extra in self.log_extras:  # what other parts of the league add (its exploiters)
            line.update(extra())
        path = Path(self.exp.run_dir) / "league.jsonl"
        try:
            with open(path, "a") as f:
                f.write(json.dumps(line) + "\n")
        except OSError as err:
            raise WriteError.of(path, err, "the lines written before are intact") from err
        self.logged += 1

    # -- checkpoint -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        def moving(m: Member) -> dict[str, Any]:
            """What changes in a member as it plays: its sampling RNGs and recurrent state."""
            out: dict[str, Any] = {"memory": {k: v.copy()
                                               for k, v in m.recurrent_state.items()}}
            if m.algo is not None:
                out["rngs"] = _rngs(m.algo.frozen_state())
            elif hasattr(m.actor, "state_dict"):
                out["actor"] = m.actor.state_dict()
            return out

        return {"members": [{"name": m.name, "kind": m.kind, "env_steps": m.env_steps,
                             "file": m.file, "retired": m.retired, **moving(m)}
                            for m in self.members],
                "ratings": self.ratings, "skill": {k: list(v) for k, v in self.skill.items()},
                "results": {k: list(v) for k, v in self.results.items()},
                "by_side": {k: [list(r) for r in v] for k, v in self.by_side.items()},
                "rng": self.rng.bit_generator.state, "assign": self.assign.tolist(),
                "learner_side": self.learner_side.tolist(), "next_snapshot": self.next_snapshot,
                "void": self.void.tolist(), "pending": [dict(p) for p in self.pending],
                "mirror": self.mirror.tolist(), "games_against_self": self.games_against_self,
                "logged": self.logged, "opening": [list(t) for t in self.opening],
                "rating": self.settings.rating, "sides": self.side_of.tolist()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._check_same_game(state)
        self.skill = {k: list(v) for k, v in state.get(
            "skill", {k: [r] for k, r in state["ratings"].items()}).items()}
        self.results = {k: list(v) for k, v in state["results"].items()}
        self.by_side = {k: [list(r) for r in v] for k, v in state.get("by_side", {}).items()}
        self.rng.bit_generator.state = state["rng"]
        self.next_snapshot = state["next_snapshot"]
        self.games_against_self = state.get("games_against_self", 0)
        self.pending = [dict(p) for p in state.get("pending", [])]
        # (a checkpoint from before this was kept: too late to watch)
        self.opening = [list(t) for t in state.get("opening", [[0.0]] * OPENING_GAMES)]
        fixed = {m.name: m for m in self.members if m.kind != "snapshot"}  # as configured now
        saved = state["members"]
        now: dict[int, int] = {}  # a saved member's index -> its index now
        self.members = []
        for i, m in enumerate(saved):
            member = self._restored(m, fixed)
            if member is not None:
                now[i] = len(self.members)
                self.members.append(member)
        left = [m["name"] for i, m in enumerate(saved) if i not in now]
        joined = [name for name in fixed if name not in {m.name for m in self.members}]
        for name in joined:
            self._add(fixed[name])
        self._reassign(state, now, left, joined)
        self._retire_oldest(self.exp.runner.env_steps)  # league.max_snapshots may be lower now
        self._scripted_obs()
        if "logged" in state:  # lines written after the checkpoint are written again
            self.logged = state["logged"]
            _keep_lines(Path(self.exp.run_dir) / "league.jsonl", self.logged)

    def _check_same_game(self, state: dict[str, Any]) -> None:
        """Refuse a checkpoint whose ratings or sides this config cannot go on with."""
        skill = state.get("skill", {})
        rating = state.get("rating", "elo" if all(len(v) == 1 for v in skill.values())
                           else "openskill")
        if rating != self.settings.rating:
            raise LeagueError(
                f"league.rating: the checkpoint's league rates with {rating}, this config with "
                f"{self.settings.rating}, and the ratings of one cannot go on in the other; "
                f"resume with -s league.rating={rating}")
        sides = state.get("sides")
        if sides is not None and sides != self.side_of.tolist():
            agents = list(self.exp.specs[self.pid].agents)
            raise LeagueError(
                f"league.sides: the checkpoint's league put agents {agents} on sides {sides}, "
                f"this config on {self.side_of.tolist()}; its games and ratings are of those "
                "sides: resume with the run's league.sides")

    def _restored(self, saved: dict[str, Any], fixed: dict[str, Member]) -> Member | None:
        """A saved member as it was; None for a fixed member league.fixed no longer lists."""
        if saved["kind"] in self.restorers:
            member = self.restorers[saved["kind"]](saved)
        elif saved.get("file"):  # frozen into the league folder: a snapshot, a frozen exploiter
            path = self.folder / saved["file"]
            if not path.is_file():
                raise LeagueError(f"league: snapshot {path} is missing; the pool cannot be "
                                  "restored")
            state = snapshot_state(path, "league")
            actor, algo = self._frozen(_merged(state, saved.get("rngs", {})))
            member = Member(saved["name"], saved["kind"], saved["env_steps"], actor,
                            saved["file"], algo=algo)
        elif saved["name"] in fixed:
            member = fixed[saved["name"]]
            if "actor" in saved and hasattr(member.actor, "load_state_dict"):
                member.actor.load_state_dict(saved["actor"])
        else:
            return None
        member.retired = bool(saved.get("retired", False))
        member.recurrent_state = {k: np.array(v) for k, v in saved.get("memory", {}).items()}
        return member

    def _reassign(self, state: dict[str, Any], now: dict[int, int], left: list[str],
                  joined: list[str]) -> None:
        """Each copy's member and side as saved; a game against a member that left the pool
        is played out by another, unrated."""
        assign = np.array(state["assign"], np.int64)
        if len(assign) != len(self.assign):  # other env copies (fresh episodes): drawn anew
            return
        self.restores += 1
        self.learner_side = np.array(state["learner_side"], np.int64)
        self.void = np.array(state.get("void", np.zeros(len(assign), bool)), bool)
        self.mirror = np.array(state.get("mirror", np.zeros(len(assign), bool)), bool)
        if not self._pool():  # every member left: the learner as it is now joins
            self.snapshot(self.exp.runner.env_steps)
        for env, index in enumerate(assign.tolist()):
            if index in now:
                self.assign[env] = now[index]
            else:
                self.assign[env], self.void[env] = self.sample(), True
        said = []
        if left:
            said.append(f"{left} left the pool (their ratings and games so far stay in "
                        f"league.jsonl; {int(self.void.sum())} games under way against them are "
                        "played out by other members, unrated)")
        if joined:
            said.append(f"{joined} joined it at the initial rating")
        if said:
            warnings.warn(f"league.fixed changed since the checkpoint: {'; '.join(said)}",
                          LeagueWarning, stacklevel=2)


def league_of(exp: Any) -> League:
    """The league attached to experiment ``exp`` (one whose config has a league)."""
    return next(part for part in exp.attached if isinstance(part, League))


class LeagueError(ConfigError):
    """A league that cannot be shown or restored."""


class LeagueWarning(UserWarning):
    """A league that runs, but not as its config may have meant."""


def _keep_lines(path: Path, keep: int) -> None:
    """Keep the first ``keep`` lines of ``path``: those a checkpoint had seen written."""
    if not path.is_file():
        return
    lines = path.read_bytes().splitlines(keepends=True)
    # A line cut short (the disk lost its end) stays, ended, for readers to skip.
    cut = bool(lines) and len(lines) <= keep and not lines[-1].endswith(b"\n")
    if len(lines) > keep or cut:
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            tmp.write_bytes(b"".join(lines[:keep]) + (b"\n" if cut else b""))
            tmp.replace(path)  # all the lines or the kept ones, whatever stops this
        except OSError as err:
            tmp.unlink(missing_ok=True)
            raise WriteError.of(path, err, "it is as it was") from err

"""A league on Ray env runners: the members act where their episodes are stepped.

The learner keeps the league (:class:`~interplay.population.league.pool.League`: the pool, the
ratings, the sampler and their checkpoints). :class:`LeagueOnRay` is its passenger on the
runners (:mod:`interplay.backends.ray.riders`): before each block it tells every runner the
pool's names in order and the members it does not hold yet (a snapshot's state is put into
Ray's object store once, and each runner builds the member from it once), and which left the
pool. Each runner's :class:`LeagueRider` acts for the learner's policy on its copies (the learner
on its side, the copy's member on the others, as locally), draws each new episode's member and
side with the league's own sampler, and says after every step which episodes started against
whom and which games ended how. The learner books those games into its ratings and results as
the loop takes that step, so one runner writes the local league's ``league.jsonl``, number for
number: the first runner draws on from the learner's sampler state and hands it back after
every step, as it does with the acting generators; the others draw from streams of their own
and hear the other runners' games once per block (for ``pfsp``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from interplay.backends.ray.acting import generators, set_states, states
from interplay.backends.ray.riders import Rider
from interplay.config.schema import Config
from interplay.experiment.attach import Attachment
from interplay.population.league.pool import (
    League,
    LeagueActor,
    Member,
    book,
    fixed_member,
    frozen_algo,
    new_game,
    outcome,
    side_totals,
)
from interplay.seeding import rng_for, runner_seed


class LeagueOnRay(Attachment):
    """The learner's side of a league whose members act in the Ray env runners."""

    def __init__(self, league: League):
        self.league = league
        self.runners = league.cfg.backend.num_env_runners
        self.per_runner = len(league.assign) // self.runners
        self.held: dict[int, set[str]] = {}  # runner -> the members it was sent
        self.refs: dict[str, Any] = {}  # snapshot -> its state in the object store
        self.refs_at = 0  # the league's restores when those states were put
        # (runner, member, learner's side, outcome) of the games a runner played, for the others
        self.games: list[tuple[int, str, int, int]] = []
        self.told: dict[int, int] = {}  # runner -> games of ``games`` it heard of
        self.fresh_count: dict[int, int] = {}  # runner -> fresh starts it got
        self.restores = {r: 0 for r in range(self.runners)}  # league restores each runner saw
        self._gens: dict[str, list[np.random.Generator]] = {}  # member -> its generators

    def rider(self) -> LeagueRider:
        lg = self.league
        return LeagueRider(lg.cfg, lg.pid, lg.side_of, lg.env_facts)

    # -- before a block ---------------------------------------------------------------------
    def orders(self, runner: int, fresh: bool) -> dict[str, Any]:
        lg = self.league
        if not lg._pool():  # the first episodes: the learner as it is joins
            lg.snapshot(lg.exp.runner.env_steps)
        restored = self.restores[runner] != lg.restores
        if lg.restores != self.refs_at:  # the members' states as the checkpoint has them
            self.refs, self.refs_at = {}, lg.restores
        if fresh or restored:
            self.held[runner] = set()
        held = self.held.setdefault(runner, set())
        out: dict[str, Any] = {
            "names": [m.name for m in lg.members],
            "retired": [m.name for m in lg.members if m.retired],
            "members": [self._spec(m) for m in lg.members if m.name not in held]}
        held.update(m.name for m in lg.members)
        names = set(out["names"])
        self.refs = {n: ref for n, ref in self.refs.items() if n in names}  # (the rest left)
        if fresh or restored:
            out["results"] = {k: list(v) for k, v in lg.results.items()}
            out["by_side"] = {k: [list(r) for r in v] for k, v in lg.by_side.items()}
            out["rng"] = self._rng_state(runner)
            if runner == 0:  # scripted members draw from NumPy's global generator
                out["numpy"] = np.random.get_state()
        else:
            out["games"] = [(name, side, slot) for r, name, side, slot
                            in self.games[self.told[runner]:] if r != runner]
        self.told[runner] = len(self.games)
        self._forget_told_games()
        if restored:  # each copy's member and side as the checkpoint has them
            self.restores[runner] = lg.restores
            copies = slice(runner * self.per_runner, (runner + 1) * self.per_runner)
            out["seats"] = {"assign": [self._name(i) for i in lg.assign[copies]],
                            "learner_side": lg.learner_side[copies].tolist(),
                            "void": lg.void[copies].tolist(),
                            "mirror": lg.mirror[copies].tolist()}
        return out

    def _spec(self, m: Member) -> dict[str, Any]:
        spec: dict[str, Any] = {"name": m.name, "kind": m.kind, "env_steps": m.env_steps}
        if m.algo is None:  # a fixed member: each runner builds it from its entry, as it is now
            if hasattr(m.actor, "state_dict"):
                spec["actor"] = m.actor.state_dict()
            return spec
        if m.name not in self.refs:
            import ray

            self.refs[m.name] = ray.put(m.algo.frozen_state())
        return {**spec, "state": self.refs[m.name]}

    def _rng_state(self, runner: int) -> dict[str, Any]:
        """The first runner draws on from the learner's sampler; the others from their own."""
        lg = self.league
        if runner == 0:
            return lg.rng.bit_generator.state
        n = self.fresh_count[runner] = self.fresh_count.get(runner, 0) + 1
        return rng_for(lg.cfg.train.seed, "league", "runner", str(runner),
                       str(n)).bit_generator.state

    def _name(self, index: int) -> str | None:
        members = self.league.members
        return members[index].name if 0 <= index < len(members) else None

    def _forget_told_games(self) -> None:
        """Drop the games every runner heard of."""
        if len(self.told) < self.runners:
            return
        done = min(self.told.values())
        if done:
            del self.games[:done]
            self.told = {r: n - done for r, n in self.told.items()}

    # -- after each step --------------------------------------------------------------------
    def arrived(self, runner: int, offset: int, said: Any) -> None:
        if not said:
            return
        lg = self.league
        index = {m.name: i for i, m in enumerate(lg.members)}
        for event in said.get("events", []):
            if event[0] == "start":
                _, e, name, side, mirror = event
                lg.assign[offset + e] = index.get(name, -1)  # -1: one that left meanwhile
                lg.learner_side[offset + e] = side
                lg.void[offset + e] = False
                lg.mirror[offset + e] = mirror
                lg._drop_idle(lg.exp.runner.env_steps)
                index = {m.name: i for i, m in enumerate(lg.members)}
            elif event[0] == "self":  # a game against itself: counted, not rated
                lg.games_against_self += 1
            else:
                _, e, name, side, totals = event
                slot = lg.rate(name, np.asarray(totals), side)
                if self.runners > 1:
                    self.games.append((runner, name, side, slot))
        if runner == 0:  # the learner's sampler and members go on where the first runner is
            if "rng" in said:
                lg.rng.bit_generator.state = said["rng"]
            if "numpy" in said:
                np.random.set_state(said["numpy"])
            for name, moved in said.get("member_rngs", {}).items():
                if name in index:
                    member = lg.members[index[name]]
                    set_states(self._gens.setdefault(name, _generators_of(member)), moved)
        if len(self._gens) > len(index):  # (members that left)
            self._gens = {n: g for n, g in self._gens.items() if n in index}


def _generators_of(member: Member) -> list[np.random.Generator]:
    """The generators a member draws from as it acts, in the order a walk meets them (the
    same in the learner and in every runner: the member is built the same way)."""
    return generators(member.algo if member.algo is not None else member.actor)


class LeagueRider(Rider):
    """A league's seats in one Ray env runner: see the module's doc."""

    def __init__(self, cfg: Config, pid: str, side_of: np.ndarray, env_facts: tuple[bool, Any]):
        self.cfg = cfg
        self.settings = cfg.league
        self.pid = pid
        self.side_of = side_of
        self.n_sides = int(side_of.max()) + 1
        self.env_facts = env_facts
        self.members: list[Member] = []
        self.results: dict[str, list[int]] = {}
        self.by_side: dict[str, list[list[int]]] = {}
        self.rng = np.random.default_rng()  # the first orders set its state
        self.ready = False  # orders came: the pool is known
        self.pending: list[int] = []  # copies whose episodes began before the pool was known
        self.said: list[tuple[Any, ...]] = []
        self._rng_state: Any = None
        self._numpy_state: Any = None  # NumPy's global state, told when scripted members move it
        self._member_gens: dict[str, list[np.random.Generator]] = {}
        self._member_states: dict[str, list[dict[str, Any]]] = {}

    def install(self, parts: Any, index: int, restarts: int) -> None:
        runner = parts.runner
        self.specs = runner.specs
        self.spec = self.specs[self.pid]
        self.seed = runner_seed(self.cfg.train.seed, index, restarts)
        n = runner.env.num_envs
        self.assign = np.zeros(n, np.int64)
        self.learner_side = np.zeros(n, np.int64)
        self.void = np.zeros(n, bool)
        self.mirror = np.zeros(n, bool)
        group = next(g for g in runner.groups if g.spec.id == self.pid)
        group.actor = self.actor = LeagueActor(self, group.actor)

    # -- the learner's orders ---------------------------------------------------------------
    def begin(self, orders: dict[str, Any]) -> None:
        self._sync(orders["names"], set(orders["retired"]), orders["members"])
        if "results" in orders:
            self.results = {k: list(v) for k, v in orders["results"].items()}
            self.by_side = {k: [list(r) for r in v] for k, v in orders["by_side"].items()}
        for name, side, slot in orders.get("games", []):
            book(self.results, self.by_side, name, side, slot, self.n_sides)
        if "rng" in orders:
            self.rng.bit_generator.state = orders["rng"]
            self._rng_state = orders["rng"]
        if "numpy" in orders:
            np.random.set_state(orders["numpy"])
            self._numpy_state = orders["numpy"]
        if "seats" in orders:  # a checkpoint's: what was drawn here before is void
            self._seat(orders["seats"])
        self.ready = True
        for e in self.pending:
            self._start(e)
        self.pending = []

    def _sync(self, names: list[str], retired: set[str], specs: list[dict[str, Any]]) -> None:
        """The learner's members in its order; one that left stays while a copy plays it."""
        by_name = {m.name: m for m in self.members}
        for spec in specs:  # (a member sent again comes as the learner has it now)
            by_name[spec["name"]] = self._member(spec)
            self._member_gens.pop(spec["name"], None)
            self._member_states.pop(spec["name"], None)
        playing = {self.members[i].name for i in self.assign.tolist()
                   if 0 <= i < len(self.members)}
        was = [self.members[i].name if 0 <= i < len(self.members) else None
               for i in self.assign.tolist()]
        kept = [by_name[n] for n in names] + [m for m in self.members
                                              if m.name not in names and m.name in playing]
        for m in kept:
            m.retired = m.name in retired or m.name not in names
        self.members = kept
        position = {m.name: i for i, m in enumerate(kept)}
        self.assign[:] = [position.get(n, 0) if n is not None else 0 for n in was]
        self._member_gens = {m.name: self._member_gens.get(m.name) or _generators_of(m)
                             for m in kept}
        self._member_states = {m.name: self._member_states.get(m.name, states(
            self._member_gens[m.name])) for m in kept}
        self.actor.reads_env_obs_for(kept)  # as the learner's league does

    def _member(self, spec: dict[str, Any]) -> Member:
        if "state" not in spec:
            member = fixed_member(spec["name"], self.spec, self.seed)
            if "actor" in spec:
                member.actor.load_state_dict(spec["actor"])  # type: ignore[attr-defined]
            return member
        import ray

        state = spec["state"]
        actor, algo = frozen_algo(self.cfg, self.specs, self.env_facts, self.pid,
                                  ray.get(state) if isinstance(state, ray.ObjectRef) else state)
        return Member(spec["name"], spec["kind"], spec["env_steps"], actor, algo=algo)

    def _seat(self, seats: dict[str, Any]) -> None:
        position = {m.name: i for i, m in enumerate(self.members)}
        self.pending, self.said = [], []
        for e, name in enumerate(seats["assign"]):
            if name in position:
                self.assign[e] = position[name]
                self.learner_side[e] = seats["learner_side"][e]
                self.void[e] = seats["void"][e]
                self.mirror[e] = seats["mirror"][e]
            else:  # the member left the pool: another plays it out, unrated
                self._start(e)
                self.void[e] = True

    # -- episodes -----------------------------------------------------------------------------
    def on_episode_start(self, *, episode: Any, env_index: int, runner: Any) -> None:
        if self.ready:
            self._start(env_index)
        else:
            self.pending.append(env_index)

    def _start(self, e: int) -> None:
        pool = [i for i, m in enumerate(self.members) if not m.retired]
        mirror, at, side = new_game(self.settings, self.rng, [self.members[i] for i in pool],
                                    self.results, self.by_side, self.n_sides)
        i = pool[at]
        self.mirror[e], self.assign[e], self.learner_side[e], self.void[e] = mirror, i, side, False
        self.said.append(("start", e, self.members[i].name, side, mirror))

    def on_episode_end(self, *, episode: Any, env_index: int, runner: Any) -> None:
        if self.void[env_index]:
            return
        if self.mirror[env_index]:
            self.said.append(("self", env_index))
            return
        totals = side_totals(episode.returns, self.spec.agents, self.side_of, self.n_sides)
        side = int(self.learner_side[env_index])
        name = self.members[int(self.assign[env_index])].name
        book(self.results, self.by_side, name, side, outcome(totals, side), self.n_sides)
        self.said.append(("end", env_index, name, side, totals.tolist()))

    def after_step(self) -> dict[str, Any] | None:
        out: dict[str, Any] = {}
        if self.said:
            out["events"], self.said = self.said, []
        state = self.rng.bit_generator.state
        if state != self._rng_state:
            out["rng"] = self._rng_state = state
        moved: dict[str, dict[int, dict[str, Any]]] = {}
        for m in self.members:
            before, now = self._member_states[m.name], states(self._member_gens[m.name])
            changed = {i: s for i, s in enumerate(now) if i >= len(before) or before[i] != s}
            if changed:
                moved[m.name] = changed
                self._member_states[m.name] = now
        if moved:
            out["member_rngs"] = moved
        if any(m.kind == "scripted" for m in self.members):
            now = np.random.get_state()
            was = self._numpy_state
            if was is None or now[2] != was[2] or not np.array_equal(now[1], was[1]):
                out["numpy"] = self._numpy_state = now
        return out or None

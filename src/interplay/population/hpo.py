"""Evolutionary hyper-parameter search: a population of learners, selected and mutated.

Each member is a whole :class:`~interplay.experiment.loop.Experiment` (its algorithm,
networks, settings, env copies and RNG streams) in a folder of its own under
``RUN_DIR/members/``. A generation trains every member for ``hpo.evo_steps`` env steps
(:func:`train_members`, one function over a list of members, so a backend can spread it over
workers), scores it (its test return, or an Elo rating from games between members and fixed
baselines), then builds the next generation: the fittest member unchanged (``elitism``), the
rest children of tournament winners, each mutated one way (a hyper-parameter within the range
its algorithm declares, the network's shape keeping learned weights where shapes allow,
parameter noise, the activation, or nothing). A child starts from its parent's whole state:
weights, optimiser, normalisation statistics, replay buffer, counters.

``hpo.jsonl`` gets one line per member per generation; ``hpo_state.json`` and each member's
checkpoints make the search resumable exactly (``interplay hpo --resume RUN_DIR``), also
when it was stopped in the middle of a generation; ``-s hpo.generations=N`` takes a search
(finished or not) on to N generations, as a straight N-generation search on the same seed
would have gone. ``RUN_DIR/best`` is the fittest member's
run folder, for ``interplay eval``.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic import Field as PydanticField

from interplay.backends import map_members
from interplay.backends.ray.cluster import require_ray
from interplay.config.describe import to_yaml
from interplay.config.loading import load, read, read_yaml
from interplay.config.schema import Config
from interplay.config.validation import validate
from interplay.data.rollout import RolloutStorage
from interplay.envs.images import is_image
from interplay.errors import ConfigError, UserError
from interplay.experiment.loop import Experiment
from interplay.experiment.run_store.checkpoint import (
    latest_valid,
    list_checkpoints,
    load_checkpoint,
)
from interplay.experiment.run_store.interrupt import Interrupted, StopRequest
from interplay.experiment.run_store.trust import require_trust
from interplay.experiment.warm_start import requests as warm_requests
from interplay.experiment.warm_start import warm_start
from interplay.population.ratings import Elo
from interplay.seeding import rng_for

ACTIVATIONS = ("tanh", "relu", "elu", "gelu", "silu")
# What each line of hpo.jsonl holds, for the glossary (docs/metrics.md).
HPO_DOCS = {
    "generation": "the generation, from 0",
    "member": "the member's id (`m0`, `m1`, ...; a child gets a new one)",
    "parent": "the id of the member it was made from (null in generation 0)",
    "mutation": "how it differs from its parent: `init`, `none (elite)`, `none`, "
                "`<setting>: old -> new`, an architecture change, `activation=<name>`, or "
                "parameter noise",
    "fitness": "`hpo.fitness: return`: the mean of its last `hpo.eval_loop` test phases' "
               "`hpo.metric`; `rating`: its Elo rating from this generation's games",
    "env_steps": "env steps the member has trained, its ancestors' included",
    "hyperparameters": "the algorithm's mutable settings, and the network's `hidden`, "
                       "`activation` and `channels`",
}
ELO_K = 16.0
STATE_FILE = "hpo_state.json"


@dataclass
class Member:
    id: str
    parent: str | None
    mutation: str
    exp: Experiment
    scores: list[float] = field(default_factory=list)
    rating: float = 1000.0

    @property
    def cfg(self) -> Config:
        return self.exp.cfg


class Search:
    def __init__(self, cfg: Config, run_dir: Path, progress: Callable[[str], None] | None = None,
                 on_generation: Callable[[list[dict[str, Any]]], None] | None = None):
        self.cfg = cfg
        self.hpo = cfg.hpo
        self.run_dir = Path(run_dir)
        self.rng = rng_for(cfg.train.seed, "hpo")
        self.generation = 0
        self.next_member = 0  # members of this generation already trained
        self.counter = 0  # member ids handed out
        self.members: list[Member] = []
        self.bred = True  # whether ``members`` are this generation's (else its parents)
        self.progress = progress or (lambda _: None)
        self.on_generation = on_generation or (lambda _: None)
        self.done = False
        check_search(cfg)
        check_metric(cfg)

    # -- members --------------------------------------------------------------------------
    def _member_cfg(self, base: Config, seed: int) -> Config:
        data = json.loads(base.model_dump_json())
        data["train"].update({"seed": seed, "test_frequency": -1, "steps": 1, "target": None})
        data["checkpoint"].update({"every": 0, "at_end": True})
        data["log"].update({"console": False, "curve": False, "tensorboard": False})
        data["backend"] = {"name": "local"}  # a member steps its own copies, wherever it runs
        return validate(data)

    def _new_id(self) -> str:
        self.counter += 1
        return f"m{self.counter - 1}"

    def populate(self) -> None:
        for i in range(self.hpo.population):
            mid = self._new_id()
            cfg = self._member_cfg(self.cfg, int(rng_for(self.cfg.train.seed, "hpo", "member",
                                                         str(i)).integers(2**31 - 1)))
            cfg = self._initial_values(cfg)
            exp = self._experiment(cfg, mid)
            warm_start(exp.algo, exp.specs, warm_requests(cfg, exp.specs, search=True),
                       exp.run_dir)
            self.members.append(Member(mid, None, "init", exp))
        self._share_buffer()

    def _share_buffer(self) -> None:
        """With ``hpo.shared_buffer``, every member stores into and samples from the first's."""
        if not self.hpo.shared_buffer or not self.members:
            return
        shared = self.members[0].exp.storage
        if shared is None or isinstance(shared, RolloutStorage):
            raise ConfigError(f"hpo.shared_buffer: {self.cfg.algo.name} learns on-policy from "
                              "its own rollouts; only replay buffers (dqn, vdn, qmix, maddpg, "
                              "matd3, isac, masac) can be shared")
        for m in self.members[1:]:
            m.exp.storage = m.exp.algo.storage = shared

    def _experiment(self, cfg: Config, mid: str) -> Experiment:
        folder = self._dir(mid)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.yaml").write_text(to_yaml(cfg))
        return Experiment(cfg, folder)

    def _dir(self, mid: str) -> Path:
        return self.run_dir / "members" / mid

    def _initial_values(self, cfg: Config) -> Config:
        updates = {}
        for key, (low, high) in self.hpo.init.items():
            if low > 0 and high / low > 10:
                value = float(math.exp(self.rng.uniform(math.log(low), math.log(high))))
            else:
                value = float(self.rng.uniform(low, high))
            if isinstance(getattr(cfg.algo, key), int):
                value = int(round(value))
            updates[key] = value
        return _with_algo(cfg, updates) if updates else cfg

    # -- the generation loop --------------------------------------------------------------
    def run(self, stop: StopRequest | None = None) -> Path:
        stop = stop or StopRequest()
        if not self.members:
            self.populate()
            self.save()  # a search killed in its first member resumes from here
        while self.generation < self.hpo.generations and not self.done:
            if not self.bred:  # also where a finished search given more generations goes on
                self._next_generation()
            self.progress(f"generation {self.generation + 1}/{self.hpo.generations}")
            until = (self.generation + 1) * self.hpo.evo_steps
            try:
                if self.cfg.backend.name == "ray":
                    self._train_on_ray(until)
                else:
                    train_members(self.members[self.next_member:], until, stop,
                                  on_done=self._trained)
            except Interrupted as err:
                self.save()
                raise self._interrupted(err) from None
            self._score()
            self._log()
            best = self.best()
            target = self.cfg.train.target
            if target is not None and self.fitness(best) >= target:
                self.done = True
            self.generation += 1
            self.next_member = 0
            self.bred = False
            self.save()
        return self.finish()

    def _interrupted(self, err: Interrupted) -> Interrupted:
        """The stop, told as the search's: what continues it is ``hpo --resume``, not the
        member's ``resume``."""
        out = Interrupted(err.signum, self.run_dir, self.run_dir / STATE_FILE, err.env_steps)
        out.where = f"generation {self.generation}, member {self.members[self.next_member].id}" \
            if self.next_member < len(self.members) else f"generation {self.generation}"
        out.saved = f"search state written to {self.run_dir / STATE_FILE}"
        out.command = f"interplay hpo --resume {self.run_dir}"
        return out

    def _trained(self, member: Member) -> None:
        self.next_member += 1
        score = finish_member(member.exp, self.hpo.metric if self.hpo.fitness == "return"
                              else None)
        if score is not None:
            member.scores.append(score)
        self.save()

    def _train_on_ray(self, until: int) -> None:
        """Train the generation's members as Ray tasks, one member per worker: each builds
        its member from the member's folder, trains it, saves it, and the member here is
        rebuilt from that checkpoint (a resumed run equals an uninterrupted one)."""
        todo = self.members[self.next_member:]  # a new member is built there as it was here
        metric = self.hpo.metric if self.hpo.fitness == "return" else None
        # A member whose worker or node is lost is run again from where this generation began.
        jobs = [(str(m.exp.run_dir), m.exp.runner.env_steps, until, metric) for m in todo]
        scores = map_members(_train_member, jobs, self.cfg.backend,
                             num_cpus=self.cfg.backend.cpus_per_runner)
        for i, (m, score) in enumerate(zip(todo, scores, strict=True)):
            m.exp.close()
            m.exp = _load_member(m.exp.run_dir, m.id)
            if score is not None:
                m.scores.append(score)
            self.next_member = len(self.members) - len(todo) + i + 1
            self.save()

    def fitness(self, member: Member) -> float:
        if self.hpo.fitness == "rating":
            return member.rating
        recent = member.scores[-self.hpo.eval_loop:]
        return float(np.mean(recent)) if recent else -math.inf

    def best(self) -> Member:
        return max(self.members, key=self.fitness)

    def _score(self) -> None:
        if self.hpo.fitness != "rating":
            return
        for member in self.members:
            member.rating = 1000.0
        play_round(self.members, self.hpo, self.rng, self.cfg.train.seed + self.generation)
        for member in self.members:
            member.scores.append(member.rating)

    def _log(self) -> None:
        rows = [{"generation": self.generation, "member": m.id, "parent": m.parent,
                 "mutation": m.mutation, "fitness": self.fitness(m),
                 "env_steps": m.exp.runner.env_steps, "hyperparameters": hyperparameters(m.cfg)}
                for m in self.members]
        with open(self.run_dir / "hpo.jsonl", "a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        plot_lineage(self.run_dir)
        self.on_generation(rows)

    # -- selection and mutation -----------------------------------------------------------
    def _next_generation(self) -> None:
        ranked = sorted(self.members, key=self.fitness, reverse=True)
        children: list[Member] = []
        if self.hpo.elitism:
            elite = ranked[0]
            children.append(self._offspring(elite, "elite", keep=True))
        while len(children) < self.hpo.population:
            picks = self.rng.choice(len(self.members), self.hpo.tournament_size, replace=False)
            parent = max((self.members[int(i)] for i in picks), key=self.fitness)
            children.append(self._offspring(parent, self._mutation()))
        parents, self.members, self.bred = self.members, children, True
        self.save()  # the children are saved: the parents' folders are no longer needed
        for m in parents:  # what they were is in hpo.jsonl; their children carry their state
            m.exp.close()
            shutil.rmtree(m.exp.run_dir, ignore_errors=True)

    def _mutation(self) -> str:
        weights = self.hpo.mutation.model_dump()
        names = [n for n, w in weights.items() if w > 0]
        p = np.array([weights[n] for n in names], float)
        return str(self.rng.choice(names, p=p / p.sum()))

    def _offspring(self, parent: Member, mutation: str, keep: bool = False) -> Member:
        mid = self._new_id()
        cfg, what = parent.cfg, mutation
        if mutation == "hp":
            cfg, what = mutate_hp(cfg, self.hpo, self.rng)
        elif mutation == "arch":
            image = any(is_image(spec.obs_space) for spec in parent.exp.specs.values()
                        if spec.trainable)
            cfg, what = mutate_arch(cfg, self.rng, image)
        elif mutation == "activation":
            current = cfg.algo.model.activation  # type: ignore[attr-defined]
            choice = str(self.rng.choice([a for a in ACTIVATIONS if a != current]))
            cfg, what = _with_algo(cfg, {"model": {"activation": choice}}), f"activation={choice}"
        child = self._experiment(cfg, mid)
        state = adapt_state(parent.exp.state_dict(), child)
        if mutation == "noise":
            add_noise(state["algo"], self.hpo.noise_std, self.rng)
            what = f"noise std {self.hpo.noise_std}"
        child.load_state_dict(state, source=f"member {parent.id}")
        if self.hpo.shared_buffer and parent.exp.storage is not None:
            child.storage = child.algo.storage = parent.exp.storage
        child.save()  # where a resumed search starts this child from
        return Member(mid, parent.id, "none (elite)" if keep else what, child,
                      list(parent.scores), parent.rating)

    # -- saving -----------------------------------------------------------------------------
    def save(self) -> None:
        state = {
            "generation": self.generation, "next_member": self.next_member,
            "counter": self.counter, "done": self.done, "bred": self.bred,
            "rng": self.rng.bit_generator.state,
            "members": [{"id": m.id, "parent": m.parent, "mutation": m.mutation,
                         "scores": m.scores, "rating": m.rating} for m in self.members],
        }
        tmp = self.run_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self.run_dir / STATE_FILE)

    def restore(self) -> None:
        state = read_state(self.run_dir)
        self.generation, self.next_member = state.generation, state.next_member
        self.counter, self.done, self.bred = state.counter, state.done, state.bred
        try:
            self.rng.bit_generator.state = state.rng
        except (TypeError, ValueError, KeyError) as err:
            raise HPOError(f"{self.run_dir / STATE_FILE}: rng is not a random generator's "
                           f"state ({err}); the file is damaged") from None
        trim_log(self.run_dir, self.generation)
        for m in state.members:
            folder = self._dir(m.id)
            if not (folder / "config.yaml").is_file():
                raise HPOError(f"{self.run_dir / STATE_FILE} lists member {m.id}, but "
                               f"{folder} holds no config.yaml; the search folder is incomplete")
            self.members.append(Member(m.id, m.parent, m.mutation, _load_member(folder, m.id),
                                       list(m.scores), m.rating))
        self._share_buffer()

    def finish(self) -> Path:
        best = self.best()
        dest = self.run_dir / "best"
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(best.exp.run_dir, dest)
        (dest / "member.json").write_text(json.dumps({"member": best.id,
                                                      "fitness": self.fitness(best)}))
        for m in self.members:
            m.exp.close()
        return dest


LOG_FILE = "hpo.jsonl"


def trim_log(run_dir: Path, generations: int) -> None:
    """Keep the rows of ``hpo.jsonl`` of the first ``generations`` generations (those the saved
    state has done): a search stopped after writing a generation's rows but before saving
    writes them again, and a line cut short by a kill is dropped. A damaged line before the
    last is named, and the file left as it is."""
    path = run_dir / LOG_FILE
    if not path.is_file():
        return
    lines = path.read_text(errors="replace").splitlines()
    kept = []
    for i, line in enumerate(lines):
        try:
            row = json.loads(line)
            generation = row["generation"]
        except (ValueError, TypeError, KeyError):
            if i == len(lines) - 1:
                break
            raise HPOError(f"{path}, line {i + 1}: not a row of the search ({line[:60]!r}); "
                           "the file is damaged; it was left as it is") from None
        if isinstance(generation, int) and generation < generations:
            kept.append(line + "\n")
    tmp = run_dir / (LOG_FILE + ".tmp")
    tmp.write_text("".join(kept))
    tmp.replace(path)


def plot_lineage(run_dir: Path) -> None:
    """``lineage.png``: every member's fitness by generation, a line from each to its parent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [json.loads(x) for x in (run_dir / "hpo.jsonl").read_text().splitlines() if x]
    where = {r["member"]: (r["generation"], r["fitness"]) for r in lines}
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in lines:
        parent = where.get(r["parent"]) if r["parent"] else None
        if parent is not None and math.isfinite(parent[1]) and math.isfinite(r["fitness"]):
            ax.plot([parent[0], r["generation"]], [parent[1], r["fitness"]], color="0.7",
                    linewidth=0.8, zorder=1)
    finite = [r for r in lines if math.isfinite(r["fitness"])]
    ax.scatter([r["generation"] for r in finite], [r["fitness"] for r in finite], s=18,
               c=["tab:red" if r["mutation"] == "none (elite)" else "tab:blue" for r in finite],
               zorder=2)
    best: dict[int, float] = {}
    for r in finite:
        best[r["generation"]] = max(best.get(r["generation"], -math.inf), r["fitness"])
    ax.plot(list(best), list(best.values()), color="black", linewidth=1.5, label="best")
    ax.set_xlabel("generation")
    ax.set_ylabel("fitness")
    ax.set_title("members by generation (red: the elite; grey: from parent to child)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    tmp = run_dir / "lineage.png.tmp.png"
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(run_dir / "lineage.png")


def leaderboard(rows: list[dict[str, Any]]) -> Any:
    """A generation's members as a table, fittest first."""
    from rich.table import Table

    gen = rows[0]["generation"] if rows else 0
    table = Table(title=f"generation {gen}")
    for col in ("member", "parent", "mutation", "fitness", "env steps"):
        table.add_column(col, justify="right" if col in ("fitness", "env steps") else "left")
    for r in sorted(rows, key=lambda r: -r["fitness"]):
        table.add_row(r["member"], r["parent"] or "", r["mutation"], f"{r['fitness']:.2f}",
                      f"{r['env_steps']:,}")
    return table


class HPOError(UserError):
    """A search that cannot start or go on."""


class _SavedMember(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = PydanticField(pattern=r"^m[0-9]+$")
    parent: str | None
    mutation: str
    scores: list[float]
    rating: float


class _SavedSearch(BaseModel):
    """What ``hpo_state.json`` holds, checked before any of it is used."""

    model_config = ConfigDict(extra="forbid")
    generation: int = PydanticField(ge=0)
    next_member: int = PydanticField(ge=0)
    counter: int = PydanticField(ge=0)
    done: bool
    bred: bool = True  # states written before it was saved had always bred
    rng: dict[str, Any]
    members: list[_SavedMember]

    @model_validator(mode="after")
    def _consistent(self) -> _SavedSearch:
        if self.next_member > len(self.members):
            raise ValueError(f"next_member {self.next_member} is past the {len(self.members)} "
                             "members")
        if len({m.id for m in self.members}) != len(self.members):
            raise ValueError("a member is listed twice")
        return self


def read_state(run_dir: Path) -> _SavedSearch:
    """The search state saved in ``run_dir``; a missing or damaged file is named, and left as
    it is."""
    path = Path(run_dir) / STATE_FILE
    if not path.is_file():
        if (Path(run_dir) / "metrics.jsonl").is_file():
            hint = f"; it holds a training run (continue that with `interplay resume {run_dir}`)"
        elif (Path(run_dir) / "config.yaml").is_file():
            hint = (f"; it holds no saved search (start one there with `interplay hpo --run-dir "
                    f"{run_dir} --overwrite`)")
        else:
            hint = "; is this the folder of a search?"
        raise HPOError(f"{run_dir}: no {STATE_FILE}{hint}")
    try:
        return _SavedSearch.model_validate_json(path.read_bytes())
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the file"
        raise HPOError(f"{path} is damaged ({where}: {first['msg']}); it was left as it is. "
                       "Restore it from a backup, or start the search again with "
                       "--overwrite") from None
    except OSError as err:
        raise HPOError(f"cannot read {path}: {err.strerror or err}") from None


def _load_member(folder: Path, mid: str, upto: int | None = None) -> Experiment:
    """Member ``mid`` as its folder's latest checkpoint left it (as built, before training);
    with ``upto``, the latest at that env step or before (where its generation began)."""
    written = list_checkpoints(folder)
    checkpoint = latest_valid(folder, upto) if written else None
    if written and checkpoint is None:
        raise HPOError(f"member {mid}: none of its checkpoints in {folder / 'checkpoints'} can "
                       "be read (each is damaged), so the search cannot go on where it was; "
                       "they were left as they are")
    exp = Experiment(load([folder / "config.yaml"], []), folder)
    if checkpoint is not None:
        saved, _ = load_checkpoint(checkpoint)
        exp.load_state_dict(saved, source=f"member {mid}")
    else:  # a first-generation member not trained yet: it starts as populate() made it
        warm_start(exp.algo, exp.specs, warm_requests(exp.cfg, exp.specs, search=True))
    return exp


def finish_member(exp: Experiment, metric: str | None) -> float | None:
    """After a member's training: its test phase's ``metric`` (None: no test phase), then a
    checkpoint."""
    score = None
    if metric is not None:
        row = exp.test_phase(exp.counters["wall_s"])
        value = row.get(metric)
        if value is None:
            raise ConfigError(f"hpo.metric: test phases report no {metric!r}; they report "
                              f"{sorted(k for k in row if '/' not in k)}")
        score = float(value)
    exp.save()
    return score


def _train_member(job: tuple[str, int, int, str | None]) -> float | None:
    """One member's generation in a worker: built from its folder as the generation found it
    (``start`` env steps; a run of it lost with its node left later checkpoints), trained to
    ``until`` env steps, scored and saved there."""
    folder, start, until, metric = job
    exp = _load_member(Path(folder), Path(folder).name, upto=start)
    try:
        exp.cfg.train.steps = until
        exp.run()
        return finish_member(exp, metric)
    finally:
        exp.close()


def train_members(members: Sequence[Member], until: int, stop: StopRequest | None = None,
                  on_done: Callable[[Member], None] | None = None) -> None:
    """Train each member until it has taken ``until`` env steps, in order (one call per
    worker when a backend spreads members over several)."""
    for m in members:
        m.exp.cfg.train.steps = until
        m.exp.run(stop)
        if on_done is not None:
            on_done(m)


# -- checks ------------------------------------------------------------------------------------
def check_search(cfg: Config) -> None:
    """What a search cannot do, named before any work."""
    hpo = cfg.hpo
    settings = type(cfg.algo)
    for kind, table in (("ranges", hpo.ranges), ("init", hpo.init)):
        for key, bounds in table.items():
            where = f"hpo.{kind}.{key}"
            if key not in settings.model_fields:
                raise ConfigError(f"{where}: {cfg.algo.name} has no setting {key!r}")
            if len(bounds) != 2 or bounds[0] > bounds[1]:
                raise ConfigError(f"{where}: expected [low, high], got {bounds}")
            for value in bounds:
                try:
                    settings.model_validate({**cfg.algo.model_dump(), key: _typed(cfg, key, value)})
                except ValidationError as err:
                    raise ConfigError(f"{where}: {value} is not a valid {key} for "
                                      f"{cfg.algo.name} ({err.errors()[0]['msg']})") from None
    if hpo.fitness == "rating" and hpo.population + len(hpo.opponents) < 2:
        raise ConfigError("hpo.fitness: rating needs at least two players")
    if hpo.mutation.model_dump() and sum(hpo.mutation.model_dump().values()) <= 0:
        raise ConfigError("hpo.mutation: every weight is 0; give at least one kind a weight")
    if any(p.algo for p in cfg.policies.values()):
        raise ConfigError("hpo: a search mutates the run's algo settings; it does not take "
                          "policies.<pid>.algo")
    if hpo.shared_buffer and cfg.backend.name == "ray":
        raise ConfigError("hpo.shared_buffer: members on Ray train in processes of their own, "
                          "so they cannot share one replay buffer; set backend.name: local or "
                          "hpo.shared_buffer: false")
    if cfg.backend.name == "ray":
        require_ray()
    for opponent in hpo.opponents:
        if opponent != "random" and ":" not in opponent:
            raise ConfigError(f"hpo.opponents: {opponent!r} is neither random nor module:function")
    check_budget(cfg)


def check_budget(cfg: Config) -> None:
    """Refuse generations too short for a member to learn: an on-policy member must fill its
    rollout within one generation, an off-policy one start learning within the search (at
    the largest value ``hpo.init`` and ``hpo.ranges`` let the setting take)."""
    hpo, copies = cfg.hpo, cfg.env.num_envs
    rollout = _largest(cfg, "rollout")
    if rollout is not None and hpo.evo_steps < rollout * copies:
        need = rollout * copies
        raise ConfigError(
            f"hpo.evo_steps: {hpo.evo_steps} env steps is less than one {cfg.algo.name} update "
            f"(algo.rollout {rollout} steps of env.num_envs {copies} copies = {need} env steps), "
            f"so members would be scored without having learned; raise hpo.evo_steps to at "
            f"least {need}, or lower algo.rollout or env.num_envs")
    total = hpo.evo_steps * hpo.generations
    starts = _largest(cfg, "learning_starts")
    if starts is not None and total < starts:
        raise ConfigError(
            f"hpo.evo_steps: {hpo.generations} generations of {hpo.evo_steps} env steps "
            f"({total} in all) end before algo.learning_starts ({starts}), so no member would "
            "ever learn; raise hpo.evo_steps or hpo.generations, or lower algo.learning_starts")


def _largest(cfg: Config, key: str) -> int | None:
    """The largest value a member's integer setting ``key`` may take in the search; None when
    the algorithm has no such setting."""
    value = getattr(cfg.algo, key, None)
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    bounds = [value] + [int(table[key][1]) for table in (cfg.hpo.init, cfg.hpo.ranges)
                        if key in table]
    return max(bounds)


def check_metric(cfg: Config) -> None:
    """Refuse an ``hpo.metric`` that no member's test phase reports, before any member is
    built (a probe of one env copy tells the agents and policies)."""
    if cfg.hpo.fitness != "return":
        return
    from interplay.experiment.build import (
        check_test_metric,
        make_callbacks,
        make_specs,
        make_vec_env,
    )

    data = json.loads(cfg.model_dump_json())
    data["env"]["vectorization"] = "sync"
    probe = validate(data)
    env, _ = make_vec_env(probe, num_envs=1, keep_state=False)
    try:
        check_test_metric(cfg.hpo.metric, "hpo.metric", make_specs(probe, env), env.agents,
                          make_callbacks(probe))
    finally:
        env.close()


def _typed(cfg: Config, key: str, value: float) -> Any:
    return int(round(value)) if isinstance(getattr(cfg.algo, key), int) and not isinstance(
        getattr(cfg.algo, key), bool) else value


# -- mutations -----------------------------------------------------------------------------------
def _with_algo(cfg: Config, updates: dict[str, Any]) -> Config:
    data = json.loads(cfg.model_dump_json())
    for key, value in updates.items():
        if isinstance(value, dict) and isinstance(data["algo"].get(key), dict):
            data["algo"][key].update(value)
        else:
            data["algo"][key] = value
    return validate(data)


def hyperparameters(cfg: Config) -> dict[str, Any]:
    algo = cfg.algo
    out = {key: getattr(algo, key) for key in type(algo).mutable if hasattr(algo, key)}
    model = getattr(algo, "model", None)
    if model is not None:
        out["hidden"] = list(model.hidden)
        out["activation"] = model.activation
        out["channels"] = list(model.channels)
    return out


def mutate_hp(cfg: Config, hpo: Any, rng: np.random.Generator) -> tuple[Config, str]:
    ranges = {**type(cfg.algo).mutable, **{k: tuple(v) for k, v in hpo.ranges.items()}}
    keys = [k for k in ranges if hasattr(cfg.algo, k)]
    if not keys:
        return cfg, "none (no mutable setting)"
    key = str(rng.choice(keys))
    low, high = ranges[key]
    value = getattr(cfg.algo, key)
    grow = bool(rng.random() < 0.5)
    if isinstance(value, int) and not isinstance(value, bool):
        new: Any = max(value + 1, int(round(value * hpo.factor))) if grow else min(
            value - 1, int(round(value / hpo.factor)))
        new = int(min(max(new, low), high))
    else:
        new = value * hpo.factor if grow else value / hpo.factor
        if value == 0:
            new = (high - low) * 0.05 if grow else 0.0
        new = float(min(max(new, low), high))
    return _with_algo(cfg, {key: new}), f"{key}: {value} -> {new}"


def mutate_arch(cfg: Config, rng: np.random.Generator,
                image: bool = False) -> tuple[Config, str]:
    """One change to the network: a hidden layer added or removed, or units added to or
    removed from one (for image observations, half the time a conv layer's channels)."""
    model = getattr(cfg.algo, "model", None)
    if model is None:
        return cfg, "none (no network settings)"
    if image and rng.random() < 0.5:
        channels = list(model.channels)
        i = int(rng.integers(len(channels)))
        grow = bool(rng.random() < 0.5) or channels[i] <= 8
        channels[i] = channels[i] + max(4, channels[i] // 4) if grow else max(
            8, channels[i] - max(4, channels[i] // 4))
        return (_with_algo(cfg, {"model": {"channels": channels}}),
                f"{'add' if grow else 'remove'}_channels: {model.channels} -> {channels}")
    hidden = list(model.hidden)
    kind = str(rng.choice(["add_layer", "remove_layer", "add_units", "remove_units"]))
    if kind == "remove_layer" and len(hidden) <= 1:
        kind = "add_layer"
    if not hidden:
        hidden, kind = [64], "add_layer"
    if kind == "add_layer":
        hidden.append(hidden[-1])
    elif kind == "remove_layer":
        hidden.pop()
    else:
        i = int(rng.integers(len(hidden)))
        step = max(8, hidden[i] // 4)
        hidden[i] = hidden[i] + step if kind == "add_units" else max(8, hidden[i] - step)
    return _with_algo(cfg, {"model": {"hidden": hidden}}), f"{kind}: hidden {model.hidden} -> {hidden}"


def adapt_state(parent: dict[str, Any], child: Experiment) -> dict[str, Any]:
    """The parent's whole state, fitted to the child's networks: a tensor whose shape changed
    keeps the overlapping block of the parent's values and the child's fresh values around it;
    when any did, the optimisers start afresh (their moments belong to the old shapes); the
    run record is the child's."""
    fresh = child.state_dict()
    reshaped = _reshaped(parent["algo"], fresh["algo"])
    out = dict(parent)
    out["algo"] = _fit(parent["algo"], fresh["algo"], reshaped)
    out["run"] = fresh["run"]
    out["spaces"] = fresh["spaces"]
    return out


def _reshaped(old: Any, new: Any) -> bool:
    if isinstance(new, torch.Tensor):
        return not isinstance(old, torch.Tensor) or old.shape != new.shape
    if isinstance(new, dict) and isinstance(old, dict):
        if "param_groups" in new and "state" in new:
            return False
        return set(old) != set(new) or any(_reshaped(old[k], v) for k, v in new.items())
    if isinstance(new, list) and isinstance(old, list):
        return len(old) != len(new) or any(_reshaped(a, b) for a, b in zip(old, new, strict=True))
    return False


def _fit(old: Any, new: Any, reshaped: bool) -> Any:
    if isinstance(new, torch.Tensor) and isinstance(old, torch.Tensor):
        if old.shape == new.shape:
            return old
        if old.dim() != new.dim():
            return new
        out = new.clone()
        block = tuple(slice(0, min(a, b)) for a, b in zip(old.shape, new.shape, strict=True))
        out[block] = old[block]
        return out
    if isinstance(new, dict) and isinstance(old, dict):
        if "param_groups" in new and "state" in new:  # an optimiser: the parent's moments,
            if reshaped:  # the child's settings (a mutated learning rate)
                return new
            groups = [{**o, **{k: v for k, v in n.items() if k != "params"}}
                      for o, n in zip(old["param_groups"], new["param_groups"], strict=True)]
            return {**old, "param_groups": groups}
        return {k: _fit(old[k], v, reshaped) if k in old else v for k, v in new.items()}
    if isinstance(new, list) and isinstance(old, list) and len(old) == len(new):
        return [_fit(a, b, reshaped) for a, b in zip(old, new, strict=True)]
    return old if type(old) is type(new) else new


def add_noise(state: Any, std: float, rng: np.random.Generator, path: str = "") -> None:
    """Gaussian noise on the acting networks' weights (not targets, critics or optimisers)."""
    if isinstance(state, dict):
        for key, value in state.items():
            where = f"{path}.{key}"
            if isinstance(value, torch.Tensor):
                if (("actor" in where or "online" in where) and "target" not in where
                        and "optimizer" not in where and value.is_floating_point()
                        and value.numel() > 1):
                    scale = float(value.std()) * std
                    noise = rng.normal(0.0, scale, tuple(value.shape))
                    state[key] = value + torch.as_tensor(noise, dtype=value.dtype)
            else:
                add_noise(value, std, rng, where)


# -- rating fitness --------------------------------------------------------------------------
def play_round(members: list[Member], hpo: Any, rng: np.random.Generator, seed: int) -> None:
    """Every member plays every other and each baseline ``hpo.games`` games (each seat half of
    them), greedy; Elo ratings from the results, updated game by game in a shuffled order."""
    from interplay.experiment.versus import play_pair

    players: list[Any] = [*members, *hpo.opponents]
    elo = Elo(ELO_K)
    ratings = {id(p): elo.new() for p in players}
    results: list[tuple[Any, Any, float]] = []
    for i, a in enumerate(players):
        for b in players[i + 1:]:
            if not isinstance(a, Member):
                continue
            outcomes = play_pair(a.exp, b.exp if isinstance(b, Member) else b, hpo.games,
                                 seed + len(results))
            results += [(a, b, o) for o in outcomes]
    for k in rng.permutation(len(results)):
        a, b, score = results[int(k)]
        ratings[id(a)], ratings[id(b)] = elo.update(ratings[id(a)], ratings[id(b)], score)
    for m in members:
        m.rating = elo.shown(ratings[id(m)])


SEARCH_FILES = ("config.yaml", STATE_FILE, "hpo.jsonl", "members", "best", "lineage.png")
"""Everything a search writes into its folder (what ``--overwrite`` deletes)."""


def run_search(configs: Sequence[str], overrides: Sequence[str], run_dir: str | None,
               resume_dir: str | None, overwrite: bool = False, trust: bool = True) -> Path:
    """``interplay hpo``: a new search from config files, or ``--resume`` one, with a progress
    line per generation; SIGINT or SIGTERM ends it saved (exit 130 / 143). ``overwrite``
    deletes a search already in the folder first.

    ``trust=False`` refuses, before anything is imported, a search folder whose configs (its
    own and its members') name code, and run folders a new search's config names whose
    configs do; the CLI asks for ``--trust``."""
    from rich.console import Console

    from interplay.experiment.build import new_run_dir
    from interplay.experiment.run_store.run_folder import hold, start_afresh

    console = Console(stderr=True)
    if resume_dir:
        if overwrite:
            raise HPOError("--overwrite starts a search afresh; it does not go with --resume")
        folder = Path(resume_dir)
        if not (folder / "config.yaml").is_file():
            raise HPOError(f"--resume {folder}: no config.yaml there; is it a search's folder?")
        cfg = validate(_trusted_search(folder, overrides, trust))
    else:
        data = read(list(configs), list(overrides))
        require_trust("the config", data, overrides, trust, "hpo", own=True)
        cfg = validate(data)
        folder = Path(run_dir) if run_dir else new_run_dir(cfg)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("generations"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=console, disable=not console.is_terminal)
    task = bar.add_task("search", total=cfg.hpo.generations)

    def shown(rows: list[dict[str, Any]]) -> None:
        bar.update(task, completed=rows[0]["generation"] + 1 if rows else 0)
        console.print(leaderboard(rows))

    with hold(folder, create=not resume_dir), StopRequest() as stop, bar:
        if not resume_dir:
            start_afresh(folder, overwrite, SEARCH_FILES, "interplay hpo --resume")
        with stop.deferring():
            return search(cfg, folder, bool(resume_dir), None, stop, shown)


def _trusted_search(folder: Path, overrides: Sequence[str], trust: bool) -> dict[str, Any]:
    """The search folder's config, once it and its members' configs (which ``--resume``
    loads as they are) are checked for code that needs trust."""
    data = read([folder / "config.yaml"], list(overrides))
    require_trust(folder / "config.yaml", data, overrides, trust, "hpo --resume")
    for member in sorted((folder / "members").glob("*/config.yaml")):
        require_trust(member, read_yaml(member), (), trust, "hpo --resume")
    return data


def search(cfg: Config, run_dir: Path, resume: bool = False,
           progress: Callable[[str], None] | None = None,
           stop: StopRequest | None = None,
           on_generation: Callable[[list[dict[str, Any]]], None] | None = None) -> Path:
    """Run (or with ``resume``, continue) the search in ``run_dir``; the best member's folder.
    ``on_generation`` gets each generation's ``hpo.jsonl`` rows as they are written."""
    run_dir = Path(run_dir)
    s = Search(cfg, run_dir, progress, on_generation)
    if resume:
        s.restore()
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
    _write_config(run_dir, cfg)  # a resume's changes (more generations) hold for the next one
    return s.run(stop)


def _write_config(run_dir: Path, cfg: Config) -> None:
    tmp = run_dir / "config.yaml.tmp"
    tmp.write_text(to_yaml(cfg))
    tmp.replace(run_dir / "config.yaml")



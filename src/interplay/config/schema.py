"""The experiment config: one typed model per section, each field's doc next to its default.

Reading YAML files and overrides is :mod:`interplay.config.loading`, checking a raw config
against these sections :mod:`interplay.config.validation`, and writing one out
:mod:`interplay.config.describe`.
"""

from __future__ import annotations

import difflib
import os
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    field_validator,
    model_validator,
)

from interplay.config.algo import AlgoSettings, settings_for
from interplay.config.code import Holds, NamesCode, names_code
from interplay.config.distributions import check_values
from interplay.config.limits import MAX_COEF, MAX_COUNT, MAX_SIZE, MAX_STEPS, MAX_THREADS
from interplay.config.model import ModelOverride, ModelSettings
from interplay.loggers.base import BUILT_IN as BUILT_IN_LOGGERS


class Section(BaseModel):
    # inf and nan pass a bound like ``gt=0`` and then overflow where they are used
    model_config = ConfigDict(extra="forbid", validate_assignment=True,
                              use_attribute_docstrings=True, allow_inf_nan=False)


class EnvConfig(Section):
    id: Annotated[Any, NamesCode("env")] = "spread"
    """A built-in or registered env name, a module path (``mpe2.simple_spread_v3``) whose
    ``parallel_env()``/``env()`` builds the env, ``module:function``, a factory, or
    ``vmas:<scenario>`` (a VMAS scenario, all ``num_envs`` copies in one batched simulation on
    ``train.device``; ``env.kwargs`` go to ``vmas.make_env``; extra ``vmas``)."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the env's constructor. A value may be a distribution drawn per
    episode per copy (``{uniform: [lo, hi]}``, ``{int_range: [lo, hi]}``, ``{choice: [...]}``):
    the copy is rebuilt at an episode boundary where a drawn value changes, which costs what
    building the env costs (PettingZoo envs only)."""
    reset_options: dict[str, Any] = Field(default_factory=dict)
    """Options passed to each reset, ``reset(options=...)``; a value may be a distribution
    drawn per episode per copy, as in ``kwargs``, from the run's seeded generator (a seeded
    run draws the same values, a resumed one goes on as it would have). What an episode drew
    is recorded in ``env_options.jsonl`` (in-process copies). PettingZoo envs only."""
    api: Literal["auto", "aec", "parallel"] = "auto"
    """Which PettingZoo API to build a module path with; auto prefers ``parallel_env``."""
    num_envs: int = Field(1, ge=1, le=MAX_SIZE)
    """Env copies stepped together; each policy acts once per step for all of them."""
    vectorization: Literal["sync", "async"] = "sync"
    """How PettingZoo copies are stepped: ``sync`` (in this process) or ``async`` (in workers)."""
    num_workers: int | None = Field(None, ge=1, le=MAX_THREADS)
    """Worker processes for ``async``; none means one per CPU core, at most one per copy."""
    step_timeout_s: float = Field(60.0, gt=0, le=7 * 24 * 3600.0)
    """Seconds an ``async`` worker may take over a step or reset before it is deemed hung."""
    max_failures: int = Field(3, ge=1, le=MAX_COUNT)
    """Times one env copy may raise (rebuilt, episode dropped) with no episode finished in
    between before the run stops with the env's error."""
    max_restarts: int = Field(10, ge=0, le=MAX_COUNT)
    """Dead or hung ``async`` workers that may be replaced in a run; 0 stops at the first."""
    eval_id: Annotated[Any, NamesCode("env")] = None
    """The env test phases run on (same spaces); none = the training env."""
    opening: int | tuple[int, int] = 0
    """Turn-based (AEC) games: each training episode begins with this many moves drawn
    uniformly among the legal ones (seeded per copy), so that self-play and leagues meet
    varied positions, not the few lines their own players keep choosing; ``[low, high]``:
    a number of moves drawn uniformly from low to high for each episode (``[0, 2]`` keeps
    some games at the game's own start). Nobody books those moves, and rewards paid during
    them count for nobody. Training copies only: test phases, ``interplay eval`` (which has
    its own ``--opening``) and ``interplay exploit``'s best response start from the game's
    own start."""

    @field_validator("opening")
    @classmethod
    def _opening_range(cls, value: int | tuple[int, int]) -> int | tuple[int, int]:
        low, high = (value, value) if isinstance(value, int) else value
        if not 0 <= low <= high <= MAX_COUNT:
            raise ValueError(f"takes a number of moves (0 to {MAX_COUNT}) or a range "
                             "[low, high] of them with 0 <= low <= high")
        return 0 if high == 0 else value  # [0, 0]: no opening, as 0

    @field_validator("kwargs", "reset_options")
    @classmethod
    def _distributions(cls, value: dict[str, Any]) -> dict[str, Any]:
        check_values(value)
        return value


class PolicyConfig(Section):
    agents: list[str] | None = None
    """Agent ids or glob patterns (``agent_*``) this policy controls; none means the
    default group of the same name (ids sharing the prefix before the last ``_``)."""
    model_config = ConfigDict(extra="forbid", validate_assignment=True,
                              use_attribute_docstrings=True, populate_by_name=True,
                              allow_inf_nan=False)
    type: Literal["trainable", "random", "scripted", "frozen"] = "trainable"
    """``trainable`` (learned by the algorithm), ``random`` (legal actions, uniformly),
    ``scripted`` (``fn`` acts) or ``frozen`` (a policy trained in another run, ``from``,
    acting greedily and never updated)."""
    source: Annotated[str | None, NamesCode("run")] = Field(None, alias="from")
    """For frozen policies: ``RUN_DIR`` or ``RUN_DIR:policy_id`` (the policy to load, when
    that run trained several), a checkpoint folder inside a run, or one of its league
    snapshots (``RUN_DIR/league/snapshot_<env steps>.pt``)."""
    fn: Annotated[str | None, NamesCode("attr")] = None
    """For scripted policies: ``module:function``, called as ``fn(observation, agent_id)``
    with the env's own observation. A function that also takes an ``action_mask`` keyword
    (or ``**kwargs``) gets the legal actions as a bool array, whether the env puts them in
    the observation or in ``info["action_mask"]`` (all True when it gives none; None for
    Box actions)."""
    init_from: str | None = None
    """For trainable policies: start from the weights of a policy trained elsewhere (fine-tune):
    ``RUN_DIR`` or ``RUN_DIR:policy_id`` (that run's newest valid checkpoint), a checkpoint
    folder inside a run, or one of its league snapshots. Same spaces, network and algorithm
    family needed (checked before any step); the optimiser starts fresh, and the run folder's
    ``init_from.json`` records where the weights came from. Ignored on resume."""
    init_parts: Literal["actor", "all"] = "actor"
    """With ``init_from``: ``actor`` copies what the policy acts with (and the observation
    statistics it acts on); ``all`` also the critics, target networks and return statistics."""
    stack_size: int = Field(1, ge=1, le=MAX_COUNT)
    """Frames stacked per agent in what this policy sees (image frames along their channels)."""
    model: Annotated[dict[str, Any], Holds(lambda: ModelSettings)] = Field(default_factory=dict)
    """This policy's network: any ``algo.model`` settings, merged over ``algo.model``."""
    algo: Annotated[dict[str, Any], Holds(lambda: AlgoSettings)] = Field(default_factory=dict)
    """This policy's own algorithm settings: any setting of the run's algorithm, merged over
    ``algo`` (its own ``lr``, ``ent_coef``, ...), or ``name`` and that algorithm's settings
    for another algorithm altogether (its defaults then apply, not the run's). Policies whose
    resolved settings are the same learn together, in one learner."""

    @field_validator("model", mode="before")
    @classmethod
    def _model_keys(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValueError("expected a mapping of model settings (those of algo.model)")
        checked = ModelOverride.model_validate(value)
        return checked.model_dump(exclude_unset=True)  # by field name (``core`` is ``recurrent``)

    @model_validator(mode="after")
    def _scripted_needs_fn(self) -> PolicyConfig:
        if self.type == "scripted" and not self.fn:
            raise ValueError("a scripted policy needs fn: module:function")
        if self.type == "frozen" and not self.source:
            raise ValueError("a frozen policy needs from: RUN_DIR or RUN_DIR:policy_id")
        if self.source and self.type != "frozen":
            raise ValueError(f"from is only used by frozen policies, not type {self.type!r}")
        if self.fn and self.type != "scripted":
            raise ValueError(f"fn is only used by scripted policies, not type {self.type!r}")
        if self.init_from and self.type != "trainable":
            raise ValueError(f"init_from starts a trainable policy from trained weights; this "
                             f"policy is {self.type!r} (a frozen one takes from: instead)")
        return self


class TrainConfig(Section):
    steps: int = Field(50_000, ge=-1, le=MAX_STEPS)
    """Env steps to train for (one env step is one call of a copy's step); -1 = no limit."""
    seed: int = Field(0, ge=0, lt=2**31)
    """The one seed every RNG (python, numpy, torch, env copies) is derived from; 0 to
    2147483647 (2^31 - 1), as the seeds derived for env copies must be."""
    max_steps_per_episode: int | None = Field(None, ge=1, le=MAX_STEPS)
    """Cut episodes after this many env steps, as truncation (not termination)."""

    @field_validator("seed", mode="before")
    @classmethod
    def _seed_is_a_number(cls, value: Any) -> Any:
        if isinstance(value, bool):  # YAML reads true/yes/on as a bool, which would pass as 1
            raise ValueError("a seed is a whole number, not true or false")
        return value
    policies_to_train: list[str] | None = None
    """Trained policies that learn, by id or glob pattern (``predator_*``); none means every
    trainable policy. The others act with their current weights and are saved and restored,
    but not updated. May change on resume; a callback may change it during a run with
    ``runner.experiment.set_policies_to_train([...])``."""
    batch_mode: Literal["complete_episodes", "truncate_episodes"] = "complete_episodes"
    """``complete_episodes``: the learner gets a copy's transitions when its episode ends, so an
    episode dropped because its env raised never reaches it; ``truncate_episodes``: each
    transition as soon as it closes (sooner on long episodes, but a dropped episode's earlier
    transitions may already have been learned from)."""
    self_play: bool = False
    """One policy on every seat."""
    policy_mapping_fn: Annotated[str | None, NamesCode("attr")] = None
    """``module:function`` mapping an agent id to a policy id (for agents not listed in
    ``policies``). ``fn(agent_id)`` is called once, when the run is built; RLlib's
    ``fn(agent_id, episode, **kwargs)`` at the start of every episode in every copy, with the
    episode (``id_``, ``env_index``, ``env_id``, ``user_data``, and ``rng``, a generator
    seeded from the run's seed and the episode): a policy it returns may then control any
    agent sharing its spaces, and acts, learns and is scored only where it was put. Not with
    a league."""
    callbacks: Annotated[list[str], NamesCode("attr")] = Field(default_factory=list)
    """Callback classes as ``module:Class``."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where networks and learner batches live."""
    torch_threads: int = Field(1, ge=0, le=MAX_THREADS)
    """CPU threads torch may use; small networks run fastest on one, 0 leaves torch's default."""
    test_frequency: int = Field(-1, ge=-1, le=MAX_STEPS)
    """Env steps between test phases (greedy policies on a separate eval env); -1 = none."""
    test_episodes: int = Field(10, ge=1, le=MAX_COUNT)
    """Episodes per test phase."""
    render_every: int = Field(0, ge=0, le=MAX_STEPS)
    """Env steps between videos of one greedy episode, played on an in-process copy of the
    eval env (async and Ray runs too): ``videos/step_<env steps>.gif`` (``.mp4`` where
    ``imageio-ffmpeg`` is installed), also in TensorBoard (``video/test``, Images tab) and W&B.
    An env that cannot be drawn is reported once and the run goes on without videos; 0 = none."""
    target: float | None = None
    """Stop early once a test phase's ``target_metric`` reaches this value."""
    target_metric: str = "episode_return_mean"
    """The test metric ``target`` is compared with: a test row's name (``episode_return_mean``,
    ``policy_return_mean/<policy>``...) or a callback's metric under ``custom/`` or declared in
    its ``metrics``."""

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        if self.steps == 0:
            raise ValueError("steps must be positive, or -1 for no limit")
        if self.test_frequency == 0:
            raise ValueError("test_frequency must be positive, or -1 for no test phases")
        if self.target is not None and self.test_frequency < 0:
            raise ValueError("target is checked in test phases: set test_frequency too")
        return self


class LogConfig(Section):
    every: int | None = Field(None, ge=1, le=MAX_STEPS)
    """Env steps between two ``metrics.jsonl`` reports; none = ``max(2000, 250 * env.num_envs)``,
    a report every 250 steps of all copies at most, so many copies do not flood the file.
    Each train row's ``env_steps_per_s`` is the rate since the previous train row (the last,
    shorter window is measured together with the one before it); ``run_env_steps_per_s``
    is the whole run's: env steps over ``wall_s``, test phases and checkpoints included."""
    dir: str = "runs"
    """Where run folders are made when no ``--run-dir`` is given."""
    console: bool = True
    """Show a live progress bar."""
    split_by: str | None = None
    """A key of ``env.reset_options`` or ``env.kwargs`` (one drawn per episode): reports add
    ``split/<key>=<value>/episode_return`` (the mean return of the episodes that drew that
    value; in-process copies)."""
    tensorboard: bool = True
    """Write TensorBoard event files into the run folder."""
    curve: bool = True
    """Draw ``curve.png`` at each checkpoint and at the end."""
    wandb: bool = False
    """Also log to Weights & Biases (needs the ``wandb`` extra)."""
    wandb_project: str = "interplay"
    """The W&B project."""
    wandb_mode: Literal["offline", "online"] = "offline"
    """``offline`` works without a network; sync later with ``wandb sync``."""
    loggers: Annotated[list[str] | None, NamesCode("attr")] = None
    """Where reports go, as a list: ``console``, ``jsonl``, ``tensorboard``, ``wandb``, or your
    own ``module:Class``, built as ``Class(run_dir, config)`` (the run's config as a dict) and
    handed every report row by ``write(row)``, then ``close()`` (with a ``video(tag, frames,
    durations, step, path)`` method, test videos too). ``metrics.jsonl`` is always written
    (resume and reports read it). None: the switches above say; a switch set beside the list
    overrides it for its logger. A logger that raises is reported once and left out."""

    @field_validator("loggers")
    @classmethod
    def _known_loggers(cls, value: list[str] | None) -> list[str] | None:
        for i, name in enumerate(value or ()):
            if name not in BUILT_IN_LOGGERS and ":" not in name:
                near = difflib.get_close_matches(name, BUILT_IN_LOGGERS, n=1)
                hint = f"; did you mean {near[0]!r}?" if near else ""
                raise ValueError(f"log.loggers[{i}]: {name!r} is neither a built-in logger "
                                 f"({', '.join(BUILT_IN_LOGGERS)}) nor module:Class{hint}")
        return value

    def shows(self, name: str) -> bool:
        """Whether the built-in logger ``name`` (console, tensorboard, wandb) is on."""
        if self.loggers is None or name in self.model_fields_set:
            return bool(getattr(self, name))
        return name in self.loggers

    def own_loggers(self) -> list[str]:
        """The ``module:Class`` loggers ``loggers`` names."""
        return [name for name in self.loggers or () if name not in BUILT_IN_LOGGERS]

    def every_for(self, num_envs: int) -> int:
        """The env steps between reports for a run of ``num_envs`` copies."""
        return self.every if self.every is not None else max(2_000, 250 * num_envs)


class CheckpointConfig(Section):
    every: int = Field(0, ge=0, le=MAX_STEPS)
    """Env steps between checkpoints; 0 = only at the end."""
    keep: int = Field(3, ge=1, le=MAX_COUNT)
    """How many of the newest checkpoints to keep."""
    at_end: bool = True
    """Write a checkpoint when training ends."""


class MutationConfig(Section):
    none: float = Field(0.2, ge=0, le=MAX_COEF)
    """Weight of leaving a child as its parent was."""
    hp: float = Field(0.4, ge=0, le=MAX_COEF)
    """Weight of changing one RL hyper-parameter (grown or shrunk within its range)."""
    arch: float = Field(0.2, ge=0, le=MAX_COEF)
    """Weight of changing the network: a hidden layer added or removed, or units added or
    removed (CNN channels too), keeping the learned weights where shapes allow."""
    noise: float = Field(0.1, ge=0, le=MAX_COEF)
    """Weight of adding Gaussian noise to the policy's weights."""
    activation: float = Field(0.1, ge=0, le=MAX_COEF)
    """Weight of changing the hidden layers' nonlinearity."""


class HPOConfig(Section):
    population: int = Field(4, ge=2, le=1000)
    """Members of the population, each a full learner with its own settings and RNG streams."""
    generations: int = Field(10, ge=1, le=MAX_COUNT)
    """Generations to run (fewer when ``train.target_metric`` reaches ``train.target``)."""
    evo_steps: int = Field(10_000, ge=1, le=MAX_STEPS)
    """Env steps each member trains per generation."""
    eval_loop: int = Field(1, ge=1, le=MAX_COUNT)
    """Fitness (``return``) is the mean over this many of a member's last test phases."""
    metric: str = "episode_return_mean"
    """The test-phase metric that is the fitness with ``fitness: return``."""
    fitness: Literal["return", "rating"] = "return"
    """``return``: a test phase's ``metric``; ``rating``: an Elo rating from games every
    member plays against every other (and against ``opponents``), for two-player games."""
    games: int = Field(10, ge=2, le=MAX_COUNT)
    """With ``rating``: games per pairing (each seat half of them), so every member plays the
    same number of games per generation."""
    opponents: Annotated[list[str], NamesCode("player")] = Field(default_factory=list)
    """With ``rating``: fixed baselines every member also plays: ``random`` or
    ``module:function`` (a scripted player)."""
    tournament_size: int = Field(2, ge=2, le=1000)
    """Members drawn at random for each tournament; the fittest becomes a parent."""
    elitism: bool = True
    """The fittest member goes on unchanged into the next generation."""
    mutation: MutationConfig = Field(default_factory=MutationConfig)
    """How likely each kind of mutation is (relative weights)."""
    ranges: dict[str, list[float]] = Field(default_factory=dict)
    """``setting: [low, high]`` to mutate hyper-parameters within instead of the ranges the
    algorithm declares (checked against the setting's own bounds)."""
    init: dict[str, list[float]] = Field(default_factory=dict)
    """``setting: [low, high]``: each member's starting value drawn from this range
    (log-uniform for positive ranges spanning more than a factor of ten)."""
    factor: float = Field(1.2, gt=1, le=10.0)
    """A mutated hyper-parameter is multiplied or divided by this."""
    noise_std: float = Field(0.1, gt=0, le=10.0)
    """Parameter noise: its std relative to each weight tensor's own std."""
    shared_buffer: bool = False
    """Off-policy members share one replay buffer, so exploration is pooled."""
    init_from: str | None = None
    """The first generation starts from a trained run's weights, as ``policies.<pid>.init_from``
    does for every trained policy (each from the policy of the same id there, or from its only
    trained one): ``RUN_DIR[:policy_id]``, a checkpoint folder or a league snapshot file."""

    @model_validator(mode="after")
    def _tournament_fits(self) -> HPOConfig:
        if self.tournament_size > self.population:
            raise ValueError(f"tournament_size {self.tournament_size} is larger than the "
                             f"population {self.population}")
        return self


class ExploiterConfig(Section):
    kind: Literal["main", "league"] = "main"
    """``main``: trains against the main learner as it is now, nothing else; ``league``: against
    the whole pool (and the main learner), drawn by ``league.opponent_sampling``."""
    num_envs: int = Field(4, ge=1)
    """Env copies of its own: it takes that many env steps for each step of the main learner's
    copies."""
    threshold: float = Field(0.7, gt=0, le=1)
    """The score (wins plus half the draws, over its games since it last passed or was reset)
    at which it passes: a frozen copy of it joins the pool (``<kind>_exploiter_<i>_<env
    steps>``), and a main exploiter starts over."""
    min_games: int = Field(100, ge=1)
    """Games it plays before its score is judged."""
    max_steps: int = Field(0, ge=0)
    """Its env steps since it last started over after which it starts over anyway; 0: never."""
    init_from: str | None = None
    """What it starts over from: ``RUN_DIR[:policy_id]`` (a trained policy of the same
    algorithm and networks); none: its own first weights."""
    algo: dict[str, Any] = Field(default_factory=dict)
    """Its own settings of the run's algorithm (``lr``, ``ent_coef``...), merged over ``algo``;
    the networks are the main learner's."""

    @field_validator("algo")
    @classmethod
    def _same_networks(cls, value: dict[str, Any]) -> dict[str, Any]:
        fixed = sorted({"name", "model"} & set(value))
        if fixed:
            raise ValueError(f"an exploiter's algo may not change {fixed}: its snapshots play "
                             "with the main learner's algorithm and networks")
        return value


class LeagueConfig(Section):
    snapshot_every: int = Field(0, ge=0, le=MAX_STEPS)
    """Env steps between snapshots of the learner into the opponent pool; 0: no league.
    Needs one trained policy on every seat (self-play)."""
    max_snapshots: int = Field(10, ge=1, le=MAX_COUNT)
    """Snapshots kept in the pool (and on disk, ``league/``); the oldest leaves first."""
    opponent_sampling: Literal["latest", "uniform", "pfsp"] = "pfsp"
    """How each episode's opponent is drawn: the newest snapshot, any member alike, or
    prioritised fictitious self-play (members the learner does worse against, more often)."""
    pfsp_power: float = Field(2.0, gt=0, le=100.0)
    """pfsp weights a member by (1 - the learner's score against it) to this power."""
    sides: list[list[str]] | None = None
    """The sides of the game, each a list of agent ids or globs (``[[blue_*], [red_*]]`` for
    teams); none: each agent is a side (two-player games)."""
    fixed: Annotated[list[str], NamesCode("player")] = Field(default_factory=list)
    """Members that stay in the pool: ``random``, ``module:function`` (scripted), or a frozen
    policy from another run (``RUN_DIR[:policy_id]``, or a snapshot file of its league)."""
    against_self: float = Field(0.0, ge=0, lt=1)
    """Share of episodes (drawn at each episode start, in each env copy) in which the learner
    plays itself as it is now on every side and learns from every side's moves: self-play in
    its plain sense, with twice the learner's rows of a game against a member. The others are
    played against the pool, drawn by ``opponent_sampling``. Games against itself are
    counted (``games_against_self`` in ``league.jsonl``), not rated."""
    learn_from_members: bool = False
    """Learn from the moves the members make too, each from its own seat's view, not only from
    the learner's: twice the rows, and a scripted member's play as examples. Off-policy
    algorithms (``dqn``, ``isac``) only."""
    rating: Literal["elo", "openskill"] = "elo"
    """How members are rated from their games: ``elo`` (everyone starts at 1000; each game
    moves the two by ``elo_k`` times the surprise), or ``openskill`` (the Plackett-Luce model
    of the openskill library: a skill estimate and its uncertainty per member; the rating
    shown is the cautious estimate, skill minus three times its uncertainty, starting at 0)."""
    elo_k: float = Field(16.0, gt=0, le=400)
    """Elo's K: how far one game moves the ratings (at most 400, Elo's own scale: one game
    then moves a rating by up to 400 points)."""

    pfsp_weighting: Literal["hard", "variance"] = "hard"
    """pfsp's weight of a member from the learner's score x against it: ``hard``, (1 - x) to
    ``pfsp_power`` (members it loses to come most); ``variance``, x (1 - x) (even games come
    most)."""
    pfsp_sides: bool = False
    """pfsp draws the learner's side too: each (member, side) pair weighted by the learner's
    score on that side against that member, so that the sides it does worse on come more
    (the side is otherwise drawn uniformly)."""
    exploiters: list[ExploiterConfig] = Field(default_factory=list)
    """Learners besides the main one, each on env copies of its own, that look for the main
    learner's weaknesses and bring them into the pool; each entry's settings follow."""
    exploit_every: int = Field(0, ge=0)
    """Env steps between exploitability checks: a fresh best response trains for
    ``exploit_steps`` against the newest snapshot and its greedy win rate is reported as
    ``exploitability``; 0: none."""
    exploit_steps: int = Field(20_000, ge=1)
    """Env steps each exploitability check's best response trains for."""

    @model_validator(mode="after")
    def _a_league_or_none(self) -> LeagueConfig:
        if self.snapshot_every == 0:
            unused = [f"league.{name}" for name, f in type(self).model_fields.items()
                      if name != "snapshot_every"
                      and getattr(self, name) != f.get_default(call_default_factory=True)]
            if unused:
                raise ValueError(f"{', '.join(unused)} set, but league.snapshot_every is 0, so "
                                 "no league runs; set league.snapshot_every (env steps between "
                                 "snapshots) to run one, or leave these out")
        if self.pfsp_sides and self.opponent_sampling != "pfsp":
            raise ValueError(f"league.pfsp_sides weights the sides by pfsp, but "
                             f"league.opponent_sampling is {self.opponent_sampling!r}; set it "
                             "to pfsp or drop league.pfsp_sides")
        seen: dict[str, str] = {}
        for entry in self.fixed:
            if not entry.strip():
                raise ValueError("league.fixed has an empty entry; each names a member: random, "
                                 "module:function or RUN_DIR[:policy_id]")
            same = _member_key(entry)
            if same in seen:
                also = f" (also as {entry!r})" if entry != seen[same] else ""
                raise ValueError(f"league.fixed lists the member {seen[same]!r} twice{also}; "
                                 "list each member once")
            seen[same] = entry
        return self


def _member_key(entry: str) -> str:
    """What tells league.fixed members apart: a path's spelling does not."""
    if entry == "random" or names_code(entry):
        return entry
    path, colon, pid = entry.rpartition(":") if ":" in entry else (entry, "", "")
    return os.path.normpath(path) + colon + pid


_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]")


def check_ray_address(value: str) -> None:
    """Accept only what says where Ray is: empty, ``auto``, ``host:port`` or ``ray://host:port``;
    anything else (a scheme Ray would resolve elsewhere, ``local``, a bare host) is refused."""
    if value in ("", "auto"):
        return
    host, sep, port = value.removeprefix("ray://").rpartition(":")
    if not (sep and _HOST.fullmatch(host) and port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"{value!r} is not a Ray address: use empty (start a Ray on this "
                         "machine), auto (the cluster this machine is a node of), host:port "
                         "(the head's GCS, e.g. 10.0.0.1:6379) or ray://host:port (Ray Client)")


class BackendConfig(Section):
    name: Literal["local", "ray"] = "local"
    """Where the env copies are stepped: ``local`` (in this process, or ``env.vectorization``'s
    workers) or ``ray`` (on Ray env runners; needs the ``ray`` extra). The learner stays here."""
    address: Annotated[str, NamesCode("cluster")] = ""
    """``ray`` only: empty starts a Ray on this machine, bound to 127.0.0.1 with no dashboard
    (``RAY_ADDRESS`` is not read); ``auto`` (the cluster this machine is a node of) or an
    address written out (``ray://host:10001``, ``host:6379``) joins a running cluster, which is
    trusted with the config, the policies' weights and the code it names: its network must be
    trusted too. A run folder's config that would join a cluster needs ``--trust``."""
    num_env_runners: int = Field(2, ge=1, le=MAX_THREADS)
    """Ray actors that each step their own copies of the env with copies of the policies."""
    envs_per_runner: int | None = Field(None, ge=1, le=MAX_SIZE)
    """Env copies on each runner; none = ``env.num_envs``. A run with one runner and
    ``env.num_envs`` copies on it is the local run, step for step."""
    cpus_per_runner: float = Field(1.0, gt=0, le=MAX_THREADS)
    """CPUs Ray reserves for each runner."""
    placement: Literal["pack", "spread"] = "pack"
    """Where Ray puts the env runners and search members: ``pack`` puts the runners on as few
    nodes as they fit on (a Ray placement group; search members go where Ray's default puts
    them, this node first); ``spread`` puts each on another node where it can, so that losing
    a node loses few of them."""
    gpus_for_learner: float = Field(0.0, ge=0, le=MAX_THREADS)
    """GPUs the learner (this process, on ``train.device``) needs: more than 0 reserves them on
    this node through Ray (refused before any step where the cluster or this node has too few)
    and stops a run that would learn on the CPU. Env runners act on CPU copies of the
    weights, sent once per update, and are given no GPU."""
    max_restarts: int = Field(3, ge=0, le=MAX_COUNT)
    """Runner actors (and search members' tasks) that may die, their node lost with them, and be
    started again in a run; one more stops the run in a checkpoint, naming the runner, its
    node and its last error."""
    @field_validator("address")
    @classmethod
    def _an_address(cls, value: str) -> str:
        check_ray_address(value)
        return value

    steps_per_call: int = Field(64, ge=1, le=MAX_STEPS)
    """Steps each runner takes per remote call when the learner does not say when it next
    learns (off-policy learners): its policies may then lag the learner by the updates made
    in up to two such blocks (reported as ``policy_lag``). On-policy learners step exactly
    up to their next update."""


class Config(Section):
    env: EnvConfig = Field(default_factory=EnvConfig)
    """The environment and how its copies are stepped."""
    algo: SerializeAsAny[AlgoSettings] = Field(default_factory=AlgoSettings)
    """The algorithm and its settings, checked by the model its ``name`` selects."""
    policies: dict[str, PolicyConfig] = Field(default_factory=dict)
    """Policy id -> the agents it controls and how it acts. Agents no policy lists go to
    ``train.policy_mapping_fn``; when no policy lists any agent and there is no function, the
    agents sharing the prefix before the last ``_`` share one policy (``agent_0``, ``agent_1``
    -> ``agent``)."""
    train: TrainConfig = Field(default_factory=TrainConfig)
    """How long and how to train: steps, seed, episodes, test phases, callbacks."""
    log: LogConfig = Field(default_factory=LogConfig)
    """What a run reports and where: ``metrics.jsonl``, console, TensorBoard, W&B."""
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    """When checkpoints are written into ``checkpoints/`` and how many are kept."""
    league: LeagueConfig = Field(default_factory=LeagueConfig)
    """Self-play league: snapshots of the learner as opponents, matchmaking, Elo ratings."""
    hpo: HPOConfig = Field(default_factory=HPOConfig)
    """Evolutionary hyper-parameter search (``interplay hpo``): population, generations,
    fitness, selection and mutations."""
    backend: BackendConfig = Field(default_factory=BackendConfig)
    """Where env copies are stepped: in this process or on Ray env runners."""

    @model_validator(mode="before")
    @classmethod
    def _algo_by_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("algo"), dict):
            data = {**data, "algo": settings_for(data["algo"])}
        return data


SECTIONS: dict[str, type[BaseModel]] = {
    "env": EnvConfig, "train": TrainConfig, "log": LogConfig,
    "checkpoint": CheckpointConfig, "hpo": HPOConfig, "league": LeagueConfig,
    "backend": BackendConfig,
}

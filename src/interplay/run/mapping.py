"""Which policy controls which agent, decided and checked before the first step.

Agents are assigned, in order of precedence: by explicit ids in a policy's ``agents``, by glob
patterns there (an agent matched by two policies' patterns is an error), by
``train.policy_mapping_fn``, and otherwise by default groups: ids that share the prefix
before the last ``_`` share one policy named after that prefix (``bob_0``, ``bob_1`` → ``bob``).
With ``train.self_play`` every agent is on one policy.

A mapping function that takes the episode (RLlib's ``fn(agent_id, episode, **kwargs)``) is
called again at the start of every episode in every copy (:class:`EpisodeMapping`): a policy
it may return then holds a slot for each agent that shares its spaces, and acts, learns and
is scored only where the function put it in that episode.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gymnasium import spaces

from interplay.config.code import load_callable
from interplay.config.model import model_for
from interplay.config.schema import PolicyConfig
from interplay.envs.images import ImagePrep, LeafPrep, image_prep, leaf_prep
from interplay.envs.spaces import ActionView, ObsView, obs_view, same_space
from interplay.errors import ConfigError
from interplay.run.episodes import Episode
from interplay.seeding import rng_for


@dataclass(frozen=True)
class PolicySpec:
    """A policy and the agents it controls; all of them share these spaces."""

    id: str
    agents: tuple[str, ...]
    config: PolicyConfig
    obs_space: spaces.Space
    action_space: spaces.Space
    obs_view: ObsView  # what the policy sees of one observation (after ``prep``)
    action_view: ActionView
    prep: ImagePrep | LeafPrep | None = None  # grayscale/resize between env's view and policy's
    # Set when train.policy_mapping_fn chooses per episode which of ``agents`` this policy
    # controls (``agents`` are then every agent it may control).
    mapping: EpisodeMapping | None = None

    @property
    def trainable(self) -> bool:
        return self.config.type == "trainable"

    @property
    def obs_dim(self) -> int:
        """Width of what the policy sees: the flat observation times the frames stacked."""
        return self.obs_view.dim * self.config.stack_size


def group_of(agent: str) -> str:
    """The default group of an agent id: the prefix before its last ``_``."""
    head, sep, _ = agent.rpartition("_")
    return head if sep and head else agent


_GIVEN_NONE = ("episode", "worker")
"""Arguments an RLlib-style mapping function may require: the episode, and ``worker`` (None)."""


def mapping_caller(fn: Callable[..., Any], path: str) -> tuple[Callable[[str, Any], Any], bool]:
    """``fn`` as a function of the agent id and the episode, and whether it reads the episode,
    whichever of the accepted signatures it has: ``fn(agent_id)`` (called once, before any
    episode), ``fn(agent_id, episode, **kwargs)`` (RLlib's, called at the start of every
    episode), ``fn(agent_id, episode, worker, **kwargs)`` (``worker`` None) or
    ``fn(agent_id, *args, **kwargs)``. Decided once, from its signature."""
    what = f"train.policy_mapping_fn {path!r}"
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # no signature to read (a builtin): try the plain call
        return (lambda agent, episode: fn(agent)), False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    star = any(p.kind is p.VAR_POSITIONAL for p in params)
    if not positional and not star:
        raise ConfigError(f"{what} takes no positional argument; it is called as "
                          "fn(agent_id) or fn(agent_id, episode, **kwargs)")
    required = [p for p in positional[1:] if p.default is p.empty]
    keyword = [p for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    unknown = [p.name for p in (*required, *keyword) if p.name not in _GIVEN_NONE]
    if unknown:
        raise ConfigError(
            f"{what} requires argument(s) {', '.join(unknown)} that the mapping cannot give; "
            "it is called as fn(agent_id) or fn(agent_id, episode, **kwargs)")
    nones = {p.name: None for p in keyword if p.name != "episode"}
    if any(p.name == "episode" for p in keyword):
        fill = (None,) * len(required)
        return (lambda agent, episode: fn(agent, *fill, episode=episode, **nones)), True
    if star or (len(positional) > 1 and positional[1].name == "episode"):
        rest = (None,) * max(len(required) - 1, 0)  # after the episode: ``worker``
        return (lambda agent, episode: fn(agent, episode, *rest, **nones)), True
    fill = (None,) * len(required)
    return (lambda agent, episode: fn(agent, *fill, **nones)), False


def _per_episode(mapping_fn: str | None) -> bool:
    """Whether the mapping function ``mapping_fn`` reads the episode (is called per episode)."""
    if not mapping_fn:
        return False
    return mapping_caller(load_callable(mapping_fn, "train.policy_mapping_fn"), mapping_fn)[1]


@dataclass(frozen=True, eq=False)
class EpisodeMapping:
    """``train.policy_mapping_fn``, called at the start of every episode in every copy for each
    of ``agents``, with the episode (RLlib's names: ``id_``, ``env_index``, ``env_id``, and a
    generator of its own, ``rng``, seeded from the run's seed and the episode)."""

    fn: Callable[[str, Any], Any]
    path: str
    agents: tuple[str, ...]  # the agents it maps (those no policy lists)
    candidates: dict[str, tuple[str, ...]]  # policy -> the agents it may be given (its spaces)
    seed: int = 0
    env_id: str = ""

    def prepare(self, episode: Episode) -> None:
        """Give ``episode`` the names a mapping function may read."""
        prepare_episode(episode, self.seed, self.env_id)

    def choose(self, episode: Episode) -> dict[str, str]:
        """agent -> policy for ``episode``; raises naming a policy the run has not, or one
        whose spaces the agent does not share."""
        self.prepare(episode)
        out = {}
        for agent in self.agents:
            pid = call_mapping(self.fn, self.path, agent, episode)
            if pid not in self.candidates:
                raise ConfigError(
                    f"train.policy_mapping_fn {self.path!r} returned policy {pid!r} for agent "
                    f"{agent!r} (episode {episode.id} in copy {episode.env_index}); the run's "
                    f"policies are {sorted(self.candidates)}, fixed when it was built: declare "
                    "the others under policies")
            if agent not in self.candidates[pid]:
                raise ConfigError(
                    f"train.policy_mapping_fn {self.path!r} mapped agent {agent!r} to policy "
                    f"{pid!r} (episode {episode.id} in copy {episode.env_index}), but that "
                    f"policy acts with the spaces of {list(self.candidates[pid])}, which "
                    f"{agent!r} does not share")
            out[agent] = pid
        return out


def call_mapping(fn: Callable[[str, Any], Any], path: str, agent: str, episode: Any) -> str:
    """``fn(agent, episode)``, checked to be a policy id; its errors name the function."""
    where = "" if episode is None else f" at the start of episode {episode.id} (copy {episode.env_index})"
    try:
        pid = fn(agent, episode)
    except Exception as err:
        raise ConfigError(f"train.policy_mapping_fn {path!r} raised for agent {agent!r}{where}: "
                          f"{type(err).__name__}: {err}") from err
    if not isinstance(pid, str) or not pid:
        raise ConfigError(f"train.policy_mapping_fn returned {pid!r} for agent {agent!r}{where}; "
                          "it must return a policy id")
    return pid


PROBES = 8
"""Episodes a per-episode mapping function is asked about while the run is built, to learn
which policies it returns and the spaces of each."""


def prepare_episode(episode: Episode, seed: int, env_id: str) -> None:
    """Give ``episode`` the names a per-episode mapping function may read beside its own:
    ``env_id`` and ``rng``, a generator seeded from the run's seed, the episode and its copy."""
    episode.env_id = env_id
    episode.rng = rng_for(seed, "policy_mapping", str(episode.id), str(episode.env_index))


def probe_episodes(seed: int, env_id: str) -> list[Episode]:
    """Stand-ins handed to a per-episode mapping function while the run is built: episodes
    numbered 1, 2, ... in copies 0, 1, ..., with the names a real one has."""
    episodes = [Episode(id=i + 1, env_index=i) for i in range(PROBES)]
    for ep in episodes:
        prepare_episode(ep, seed, env_id)
    return episodes


def assign(agents: list[str], policies: dict[str, PolicyConfig], mapping_fn: str | None,
           self_play: bool, probes: list[Episode] | None = None) -> dict[str, str]:
    """agent id -> policy id, for every agent; raises naming any agent left without one.

    A mapping function that reads the episode is asked about the first of ``probes`` (made
    from seed 0 when not given)."""
    probes = probes or probe_episodes(0, "")
    if self_play:
        named = list(policies)
        if len(named) > 1:
            raise ConfigError(
                f"train.self_play puts one policy on every seat, but policies lists {named}; "
                "keep one policy (or none) under policies"
            )
        pid = named[0] if named else "shared"
        return dict.fromkeys(agents, pid)

    out: dict[str, str] = {}
    patterns: list[tuple[str, str]] = []
    for pid, pc in policies.items():
        for entry in pc.agents or ():
            if any(ch in entry for ch in "*?["):
                patterns.append((pid, entry))
            elif entry not in agents:
                raise ConfigError(
                    f"policies.{pid}.agents: {entry!r} is not an agent of this env; "
                    f"agents are {agents}"
                )
            elif entry in out and out[entry] != pid:
                raise ConfigError(
                    f"agent {entry!r} is listed under both policies.{out[entry]} and policies.{pid}"
                )
            else:
                out[entry] = pid
    for agent in agents:
        if agent in out:
            continue
        hits = sorted({pid for pid, pat in patterns if fnmatch.fnmatchcase(agent, pat)})
        if len(hits) > 1:
            raise ConfigError(f"agent {agent!r} matches the patterns of policies {hits}; make them disjoint")
        if hits:
            out[agent] = hits[0]
    for pid, pat in patterns:
        if not any(fnmatch.fnmatchcase(a, pat) for a in agents):
            raise ConfigError(f"policies.{pid}.agents: pattern {pat!r} matches no agent of {agents}")

    rest = [a for a in agents if a not in out]
    explicit = bool(out) or any(pc.agents for pc in policies.values())
    if rest and mapping_fn:
        fn, per_episode = mapping_caller(load_callable(mapping_fn, "train.policy_mapping_fn"),
                                         mapping_fn)
        for agent in rest:  # a per-episode function: as in the first episode
            out[agent] = call_mapping(fn, mapping_fn, agent, probes[0] if per_episode else None)
    elif rest and not explicit:
        for agent in rest:
            out[agent] = group_of(agent)
    elif rest:
        raise ConfigError(
            f"agent(s) {rest} are controlled by no policy; list them under a policy's agents "
            "(ids or patterns like 'agent_*') or set train.policy_mapping_fn"
        )
    unused = [pid for pid in policies if pid not in out.values()]
    if unused and not _per_episode(mapping_fn):
        groups = sorted(set(out.values()))
        raise ConfigError(
            f"policies.{unused[0]} controls no agent; policies in use are {groups} "
            f"(agents {agents})"
        )
    return out


def build_specs(agents: list[str], obs_spaces: dict[str, spaces.Space],
                act_spaces: dict[str, spaces.Space], obs_views: dict[str, ObsView],
                action_views: dict[str, ActionView], policies: dict[str, PolicyConfig],
                mapping_fn: str | None = None, self_play: bool = False, seed: int = 0,
                env_id: str = "") -> dict[str, PolicySpec]:
    """Resolve the mapping and check that each policy's agents share their spaces."""
    probes = probe_episodes(seed, env_id)
    owner = assign(agents, policies, mapping_fn, self_play, probes)
    if _per_episode(mapping_fn) and not self_play:
        return _per_episode_specs(agents, obs_spaces, act_spaces, obs_views, action_views,
                                  policies, str(mapping_fn), owner, probes, seed, env_id)

    def same(a: str, b: str) -> bool:
        return same_space(obs_spaces[a], obs_spaces[b]) and same_space(act_spaces[a], act_spaces[b])

    for pid in set(owner.values()):
        group = [a for a in agents if owner[a] == pid]
        chosen = pid in policies or self_play or mapping_fn is not None
        if not chosen and not all(same(a, group[0]) for a in group):
            # A default prefix group whose agents differ is no group: each gets its own policy.
            warnings.warn(f"agents {group} share the prefix {pid!r} but not their spaces; "
                          "each gets its own policy", stacklevel=2)
            owner.update({a: a for a in group})
    specs: dict[str, PolicySpec] = {}
    for pid in dict.fromkeys(owner[a] for a in agents):
        members = tuple(a for a in agents if owner[a] == pid)
        first = members[0]
        for a in members[1:]:
            for kind, table in (("observation", obs_spaces), ("action", act_spaces)):
                if not same_space(table[a], table[first]):
                    raise ConfigError(
                        f"policy {pid!r} controls agents with different {kind} spaces: "
                        f"{first!r} has {table[first]} but {a!r} has {table[a]}; "
                        "map them to different policies"
                    )
        specs[pid] = PolicySpec(
            id=pid, agents=members, config=policies.get(pid, PolicyConfig()),
            obs_space=obs_spaces[first], action_space=act_spaces[first],
            obs_view=obs_views[first], action_view=action_views[first],
        )
    return specs


def _per_episode_specs(agents: list[str], obs_spaces: dict[str, spaces.Space],
                       act_spaces: dict[str, spaces.Space], obs_views: dict[str, ObsView],
                       action_views: dict[str, ActionView], policies: dict[str, PolicyConfig],
                       mapping_fn: str, owner: dict[str, str], probes: list[Episode],
                       seed: int, env_id: str) -> dict[str, PolicySpec]:
    """The policies of a mapping function called per episode.

    Agents a policy lists stay with it. The function maps the others; it is asked about a few
    stand-in episodes, and each policy it returns, or that ``policies`` declares, may control
    every mapped agent that shares the spaces of the agents it was first given.
    """
    listed = _listed(agents, policies)
    mapped = [a for a in agents if a not in listed]
    fn, _ = mapping_caller(load_callable(mapping_fn, "train.policy_mapping_fn"), mapping_fn)
    given: dict[str, list[str]] = {}  # policy -> agents the stand-in episodes gave it
    for ep in probes:
        for agent in mapped:
            given.setdefault(call_mapping(fn, mapping_fn, agent, ep), []).append(agent)
    for pid in policies:
        if pid not in given and not policies[pid].agents:
            given[pid] = []

    def same(a: str, b: str) -> bool:
        return same_space(obs_spaces[a], obs_spaces[b]) and same_space(act_spaces[a], act_spaces[b])

    candidates: dict[str, tuple[str, ...]] = {}
    for pid, got in given.items():
        first = got[0] if got else mapped[0] if mapped and all(same(a, mapped[0]) for a in mapped) else None
        if first is None:
            raise ConfigError(
                f"policies.{pid}: train.policy_mapping_fn {mapping_fn!r} gave it no agent in "
                f"the first {PROBES} episodes, and the agents it maps have different spaces, so "
                "its spaces are unknown; list one of its agents under policies.{pid}.agents "
                "or have the function return it early")
        for a in got:
            if not same(a, first):
                raise ConfigError(
                    f"train.policy_mapping_fn {mapping_fn!r} gives policy {pid!r} agents with "
                    f"different spaces: {first!r} has {obs_spaces[first]} / {act_spaces[first]} "
                    f"but {a!r} has {obs_spaces[a]} / {act_spaces[a]}; map them to different "
                    "policies")
        candidates[pid] = tuple(a for a in mapped if same(a, first))
    rule = EpisodeMapping(fn, mapping_fn, tuple(mapped), candidates, seed, env_id)
    fixed = {a: pid for a, pid in owner.items() if a in listed}
    specs = build_specs([a for a in agents if a in listed], obs_spaces, act_spaces, obs_views,
                        action_views, {p: c for p, c in policies.items() if c.agents}
                        ) if fixed else {}
    for pid, members in candidates.items():
        if pid in specs:
            raise ConfigError(
                f"policies.{pid} lists agents, and train.policy_mapping_fn {mapping_fn!r} "
                "returns it too; a policy is given its agents by one of the two")
        first = members[0]
        specs[pid] = PolicySpec(
            id=pid, agents=members, config=policies.get(pid, PolicyConfig()),
            obs_space=obs_spaces[first], action_space=act_spaces[first],
            obs_view=obs_views[first], action_view=action_views[first], mapping=rule,
        )
    return specs


def _listed(agents: list[str], policies: dict[str, PolicyConfig]) -> set[str]:
    """The agents some policy lists (by id or pattern)."""
    out: set[str] = set()
    for pc in policies.values():
        for entry in pc.agents or ():
            out.update(a for a in agents if fnmatch.fnmatchcase(a, entry))
    return out


def with_preprocessing(specs: dict[str, PolicySpec], algo: Any) -> dict[str, PolicySpec]:
    """``specs`` with each trained policy's image preprocessing (``model.resize``,
    ``model.grayscale``) in place: its ``obs_view`` is then what the preprocessing makes."""
    out: dict[str, PolicySpec] = {}
    for pid, spec in specs.items():
        model = model_for(algo, spec.config.model, pid) if spec.trainable else None
        own = spec.config.model.keys() & {"resize", "grayscale", "layout"}
        where = f"policies.{pid}.model" if own else "algo.model"
        leaves = spec.obs_view.leaves
        prep = (leaf_prep(leaves, model, where) if leaves is not None
                else image_prep(spec.obs_space, model, where))
        if prep is not None:
            spec = dataclasses.replace(spec, obs_view=obs_view(prep.space, spec.agents[0]),
                                       prep=prep)
        out[pid] = spec
    return out

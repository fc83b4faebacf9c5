"""Which policy controls which agent, decided and checked before the first step.

Agents are assigned, in order of precedence: by explicit ids in a policy's ``agents``, by glob
patterns there (an agent matched by two policies' patterns is an error), by
``train.policy_mapping_fn``, and otherwise by default groups: ids that share the prefix
before the last ``_`` share one policy named after that prefix (``bob_0``, ``bob_1`` → ``bob``).
With ``train.self_play`` every agent is on one policy.
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
from interplay.config.schema import ConfigError, PolicyConfig
from interplay.envs.images import ImagePrep, image_prep
from interplay.envs.spaces import ActionView, ObsView, obs_view, same_space


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
    prep: ImagePrep | None = None  # grayscale/resize between the env's view and the policy's

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
"""Arguments an RLlib-style mapping function may require that the mapping, made once before
any episode, passes as None."""


def mapping_caller(fn: Callable[..., Any], path: str) -> Callable[[str], Any]:
    """``fn`` as a function of the agent id, whichever of the accepted signatures it has:
    ``fn(agent_id)``, ``fn(agent_id, episode, **kwargs)`` (RLlib's; ``episode`` is None, as the
    mapping is made before any episode), ``fn(agent_id, episode, worker, **kwargs)`` or
    ``fn(agent_id, *args, **kwargs)``. Decided once, from its signature."""
    what = f"train.policy_mapping_fn {path!r}"
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # no signature to read (a builtin): try the plain call
        return fn
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not positional and not any(p.kind is p.VAR_POSITIONAL for p in params):
        raise ConfigError(f"{what} takes no positional argument; it is called as "
                          "fn(agent_id) or fn(agent_id, episode, **kwargs)")
    required = [p for p in positional[1:] if p.default is p.empty]
    keyword = [p for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    unknown = [p.name for p in (*required, *keyword) if p.name not in _GIVEN_NONE]
    if unknown:
        raise ConfigError(
            f"{what} requires argument(s) {', '.join(unknown)} that the mapping cannot give; "
            "it is called as fn(agent_id) or fn(agent_id, episode, **kwargs) (episode None)")
    args = (None,) * len(required)
    kwargs = dict.fromkeys((p.name for p in keyword), None)
    return lambda agent: fn(agent, *args, **kwargs)


def assign(agents: list[str], policies: dict[str, PolicyConfig], mapping_fn: str | None,
           self_play: bool) -> dict[str, str]:
    """agent id -> policy id, for every agent; raises naming any agent left without one."""
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
        fn = mapping_caller(load_callable(mapping_fn, "train.policy_mapping_fn"), mapping_fn)
        for agent in rest:
            try:
                pid = fn(agent)
            except Exception as err:
                raise ConfigError(f"train.policy_mapping_fn {mapping_fn!r} raised for agent "
                                  f"{agent!r}: {type(err).__name__}: {err}") from err
            if not isinstance(pid, str) or not pid:
                raise ConfigError(
                    f"train.policy_mapping_fn returned {pid!r} for agent {agent!r}; it must return a policy id"
                )
            out[agent] = pid
    elif rest and not explicit:
        for agent in rest:
            out[agent] = group_of(agent)
    elif rest:
        raise ConfigError(
            f"agent(s) {rest} are controlled by no policy; list them under a policy's agents "
            "(ids or patterns like 'agent_*') or set train.policy_mapping_fn"
        )
    unused = [pid for pid in policies if pid not in out.values()]
    if unused:
        groups = sorted(set(out.values()))
        raise ConfigError(
            f"policies.{unused[0]} controls no agent; policies in use are {groups} "
            f"(agents {agents})"
        )
    return out


def build_specs(agents: list[str], obs_spaces: dict[str, spaces.Space],
                act_spaces: dict[str, spaces.Space], obs_views: dict[str, ObsView],
                action_views: dict[str, ActionView], policies: dict[str, PolicyConfig],
                mapping_fn: str | None = None, self_play: bool = False) -> dict[str, PolicySpec]:
    """Resolve the mapping and check that each policy's agents share their spaces."""
    owner = assign(agents, policies, mapping_fn, self_play)

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


def with_preprocessing(specs: dict[str, PolicySpec], algo: Any) -> dict[str, PolicySpec]:
    """``specs`` with each trained policy's image preprocessing (``model.resize``,
    ``model.grayscale``) in place: its ``obs_view`` is then what the preprocessing makes."""
    out: dict[str, PolicySpec] = {}
    for pid, spec in specs.items():
        model = model_for(algo, spec.config.model, pid) if spec.trainable else None
        own = spec.config.model.keys() & {"resize", "grayscale", "layout"}
        prep = image_prep(spec.obs_space, model,
                          f"policies.{pid}.model" if own else "algo.model")
        if prep is not None:
            spec = dataclasses.replace(spec, obs_view=obs_view(prep.space, spec.agents[0]),
                                       prep=prep)
        out[pid] = spec
    return out

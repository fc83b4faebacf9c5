"""Episode returns and lengths per copy, and the window of finished episodes a report covers."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Reduce = Literal["mean", "sum", "last", "max", "min"]
_REDUCERS = {"mean": np.mean, "sum": np.sum, "last": lambda v: v[-1], "max": np.max, "min": np.min}


@dataclass
class AgentEnd:
    """How one agent's part of an episode ended: what came with the env step that ended it."""

    obs: Any  # its last observation, env-shaped (a Dict observation's action_mask left out)
    reward: float  # the reward that step gave it
    terminated: bool
    truncated: bool
    info: dict  # the info the env gave it with that step ({} where the env gives none)


@dataclass
class Episode:
    """One episode in one copy, as callbacks see it (see :class:`interplay.Callbacks`)."""

    id: int
    env_index: int
    env: Any = None  # the copy's PettingZoo env, in-process copies only (else None)
    length: int = 0  # env steps so far
    returns: dict[str, float] = field(default_factory=dict)  # filled in when it ends
    # agent -> how its part ended, filled in as each agent finishes (all of them by
    # on_episode_end); kept only when some callback overrides on_episode_end
    final: dict[str, AgentEnd] = field(default_factory=dict)
    user_data: dict[str, Any] = field(default_factory=dict)
    custom: list[tuple[str, float, Reduce]] = field(default_factory=list)
    # agent -> the policy controlling it in this episode; empty where the mapping is fixed
    # (see train.policy_mapping_fn)
    policies: dict[str, str] = field(default_factory=dict)
    # For a per-episode mapping function (RLlib's names): the env's id and a generator seeded
    # from the run's seed and this episode
    env_id: str | None = None
    rng: np.random.Generator | None = None

    @property
    def id_(self) -> int:
        """The episode's id, by RLlib's name."""
        return self.id

    def add_metric(self, name: str, value: float, reduce: Reduce = "mean") -> None:
        """Report a value of this episode; a report reduces all values of ``name`` it covers."""
        if reduce not in _REDUCERS:
            raise ValueError(f"metric {name!r}: reduce must be one of {sorted(_REDUCERS)}, got {reduce!r}")
        self.custom.append((name, float(value), reduce))


class EpisodeTracker:
    """Running returns per (copy, agent); hands finished episodes to a window."""

    def __init__(self, agents: list[str], num_envs: int, envs: Sequence[Any] | None = None):
        self.agents = agents
        self.ret = np.zeros((num_envs, len(agents)), np.float64)
        self.seen = np.zeros((num_envs, len(agents)), bool)
        self._all_seen = False  # every entry of ``seen`` is known to be True
        # Steps per copy: ``_length`` counts the steps some copies sat out; steps every copy
        # took are counted once, in ``_common``, from ``_since[e]`` (its value when copy e's
        # episode began). ``length`` adds them up.
        self._length = np.zeros(num_envs, np.int64)
        self._common = 0
        self._since = [0] * num_envs
        self.envs = envs or [None] * num_envs
        self._next_id = 0
        self.current = [self._new(e) for e in range(num_envs)]

    def _new(self, e: int) -> Episode:
        self._next_id += 1
        return Episode(id=self._next_id, env_index=e, env=self.envs[e])

    def restore(self, ret: Any, seen: Any, length: Any, next_id: int) -> None:
        """Take back counts saved from ``ret``, ``seen``, ``length`` and the next episode id."""
        self.ret[...], self.seen[...], self._length[...] = ret, seen, length
        self._common, self._since = 0, [0] * len(self._since)
        self._all_seen = False
        self._next_id = next_id

    def acted(self, acting: np.ndarray) -> None:
        self.seen |= acting

    def stepped(self, stepped: np.ndarray, reward: np.ndarray, ended_agents: np.ndarray | None,
                everywhere: bool = False) -> None:
        """Book one step.

        ``everywhere``: every agent of every copy acted in it (then all are seen, and
        :meth:`acted` need not be called); ``ended_agents`` None: no agent finished.
        """
        self.ret += reward
        if everywhere:
            self._common += 1
            if not self._all_seen:
                self.seen.fill(True)
                self._all_seen = True
            return
        self._length += stepped
        self.seen |= reward != 0.0  # paid anything
        if ended_agents is not None:
            self.seen |= ended_agents

    def ended(self, step: Any, ended_agents: np.ndarray, obs_views: dict[str, Any]) -> None:
        """Keep, on each copy's current episode, how each agent finished in ``step`` ended."""
        infos = step.final_infos
        for e, i in zip(*np.nonzero(ended_agents), strict=True):
            agent = self.agents[i]
            self.current[e].final[agent] = AgentEnd(
                obs=obs_views[agent].unflatten(step.final_obs[agent][e].copy()),
                reward=float(step.reward[e, i]), terminated=bool(step.terminated[e, i]),
                truncated=bool(step.truncated[e, i]),
                info=infos[e].get(agent, {}) if infos is not None else {},
            )

    def finish(self, e: int) -> Episode:
        """Close copy ``e``'s episode and start the next one there."""
        ep = self.current[e]
        ep.length = self.length_of(e)
        ret, seen = self.ret[e].tolist(), self.seen[e].tolist()
        ep.returns = {a: r for a, r, s in zip(self.agents, ret, seen, strict=True) if s}
        self.drop(e)
        return ep

    def drop(self, e: int) -> None:
        """Forget copy ``e``'s partial episode and start the next one there."""
        self.ret[e] = 0.0
        self.seen[e] = False
        self._all_seen = False
        self._length[e] = 0
        self._since[e] = self._common
        self.current[e] = self._new(e)

    def length_of(self, e: int) -> int:
        """Steps copy ``e``'s current episode has taken."""
        return int(self._length[e]) + self._common - self._since[e]

    @property
    def length(self) -> np.ndarray:
        """``[E]`` steps each copy's current episode has taken (a copy)."""
        return self._length + (self._common - np.asarray(self._since, np.int64))


class Window:
    """Finished episodes and custom values since the last report."""

    # What :meth:`summary` reports, for the glossary (docs/metrics.md). Every figure is over the
    # episodes that finished in the report's window, null when none did.
    metric_docs = {
        "episode_return_mean": "mean over episodes of the episode's return summed over its agents",
        "episode_return_min": "the lowest such episode return",
        "episode_return_max": "the highest such episode return",
        "episode_len_mean": "mean episode length in env steps (for AEC envs, moves)",
        "agent_return_mean/<agent>": "mean return of one agent (seat) over the episodes it took "
                                     "part in",
        "agent_return_min/<agent>": "that agent's lowest episode return",
        "agent_return_max/<agent>": "that agent's highest episode return",
        "policy_return_mean/<policy>": "mean return per agent of the agents a policy controls "
                                       "(each agent's episode return counted once)",
        "policy_return_min/<policy>": "the lowest episode return of any of them",
        "policy_return_max/<policy>": "the highest episode return of any of them",
    }

    def __init__(self, owner: dict[str, str], limit: int | None = None):
        self.owner = owner  # agent -> policy
        self.limit = limit  # take at most this many episodes (a test phase's count)
        self.reset()

    def reset(self) -> None:
        self.totals: list[float] = []
        self.lengths: list[int] = []
        self.by_agent: dict[str, list[float]] = defaultdict(list)
        self.by_policy: dict[str, list[float]] = defaultdict(list)
        self.custom: dict[str, tuple[Reduce, list[float]]] = {}

    def add(self, ep: Episode) -> None:
        if self.limit is not None and len(self.totals) >= self.limit:
            return
        self.totals.append(sum(ep.returns.values()))
        self.lengths.append(ep.length)
        owner = ep.policies or self.owner
        for agent, r in ep.returns.items():
            self.by_agent[agent].append(r)
            self.by_policy[owner.get(agent) or self.owner[agent]].append(r)
        for name, value, reduce in ep.custom:
            self.add_custom(name, value, reduce)

    def add_custom(self, name: str, value: float, reduce: Reduce) -> None:
        known, values = self.custom.setdefault(name, (reduce, []))
        if known != reduce:
            raise ValueError(f"metric {name!r} was reported with reduce={known!r} and reduce={reduce!r}")
        values.append(value)

    def __len__(self) -> int:
        return len(self.totals)

    def summary(self) -> dict[str, float | None]:
        """The DESIGN metric names; per-episode figures are None when no episode finished."""
        out: dict[str, float | None] = {}
        t = self.totals
        out["episode_return_mean"] = _mean(t)
        out["episode_return_min"] = min(t) if t else None
        out["episode_return_max"] = max(t) if t else None
        out["episode_len_mean"] = _mean(self.lengths)
        for agent, rs in sorted(self.by_agent.items()):
            out[f"agent_return_mean/{agent}"] = _mean(rs)
            out[f"agent_return_min/{agent}"] = min(rs)
            out[f"agent_return_max/{agent}"] = max(rs)
        for pid, rs in sorted(self.by_policy.items()):
            out[f"policy_return_mean/{pid}"] = _mean(rs)
            out[f"policy_return_min/{pid}"] = min(rs)
            out[f"policy_return_max/{pid}"] = max(rs)
        for name, (reduce, values) in sorted(self.custom.items()):
            out[name] = float(_REDUCERS[reduce](np.asarray(values)))
        return out


def _mean(values: list[float] | list[int]) -> float | None:
    if not values:
        return None
    return float(np.mean(values))

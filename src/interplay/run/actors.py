"""What acts for a policy: one call per step for every agent and copy mapped to it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from interplay.envs.composite import from_env, legal_in_row
from interplay.errors import ScriptedPolicyError
from interplay.run.mapping import PolicySpec


@dataclass(slots=True)
class ActBatch:
    """The rows one policy must act on this step."""

    obs: np.ndarray  # [n, obs_dim] flat (and stacked) observations, float32 or uint8 frames
    mask: np.ndarray | None  # [n, mask_dim] bool legal actions, or None
    slot: np.ndarray | None = None  # [n] int: each row's agent (its index in the policy's agents)
    env: np.ndarray | None = None  # [n] int: each row's env copy
    first: np.ndarray | None = None  # [n] bool: the agent's first action of its episode
    # What the actor keeps per env copy and agent between steps (a recurrent policy's hidden
    # state, say): arrays it makes itself, ``[E, k, ...]``, owned and saved by the runner.
    recurrent_state: dict[str, np.ndarray] | None = None
    # Filled in only for actors that want them (``wants_env_obs``):
    agent_ids: Sequence[str] = ()
    env_obs: Sequence[Any] = ()  # the env's own observations


class Actor(Protocol):
    """What acts for a policy. A class that subclasses it gets the defaults of the facts below;
    one that does not and leaves a fact out (a user algorithm's actor) is read with
    :func:`declared`, which gives it the same default."""

    squashed: bool = False  # Box actions come in [-1, 1] and are mapped onto the space's bounds
    wants_env_obs: bool = False  # needs ``agent_ids`` and ``env_obs`` filled in

    def act(self, batch: ActBatch, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Actions ``[n, *action_shape]`` and extras to keep with the transition."""
        ...


def declared(actor: Any, fact: str) -> bool:
    """An actor's fact (``squashed``, ``wants_env_obs`` or ``reads_obs``), or the default for
    an actor that does not declare it (the :class:`Actor` protocol's, and True for
    ``reads_obs``: an actor that declares False, such as :class:`RandomActor`, never looks at
    ``ActBatch.obs`` and may be handed ``[n, 0]`` rows)."""
    return bool(getattr(actor, fact, getattr(Actor, fact, True)))


class RandomActor:
    """Uniform over legal actions (masks respected); uniform in a Box's bounds."""

    squashed = False
    wants_env_obs = False
    reads_obs = False

    def __init__(self, spec: PolicySpec, rng: np.random.Generator):
        self.view = spec.action_view
        self.rng = rng
        space = spec.action_space
        if self.view.kind == "multi_discrete":
            self._nvec = [int(k) for k in space.nvec]
            self._splits = np.cumsum(self._nvec)[:-1]
        elif self.view.kind == "box":
            self._low, self._high = _finite_bounds(space)

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]

    def act(self, batch: ActBatch, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        n = batch.obs.shape[0]
        kind = self.view.kind
        if kind == "box":
            return self.rng.uniform(self._low, self._high, (n, *self.view.shape)).astype(np.float32), {}
        mask = batch.mask
        if kind == "composite":
            return self._composite(n, mask), {}
        if kind == "discrete":
            if mask is None:  # every action legal (as masked_uniform draws them)
                return (self.rng.random(n) * self.view.mask_dim).astype(np.int64), {}
            return masked_uniform(self.rng, mask, (n, self.view.mask_dim)), {}
        parts = np.split(mask, self._splits, axis=1) if mask is not None else [None] * len(self._nvec)
        return np.stack([masked_uniform(self.rng, m, (n, k))
                         for m, k in zip(parts, self._nvec, strict=True)], axis=1), {}


    def _composite(self, n: int, mask: np.ndarray | None) -> np.ndarray:
        """Each leaf drawn on its own: legal choices uniformly, Box numbers in their bounds."""
        out = np.zeros((n, *self.view.shape), np.float32)
        for leaf in self.view.leaves:
            if leaf.kind == "box":
                low, high = _finite_bounds(leaf.space)
                out[:, leaf.cols] = self.rng.uniform(low, high, (n, *leaf.space.shape)).reshape(n, -1)
                continue
            at = leaf.mask.start
            for j, size in enumerate(leaf.sizes):
                part = mask[:, at:at + size] if mask is not None else None
                out[:, leaf.cols.start + j] = masked_uniform(self.rng, part, (n, size))
                at += size
        return out


def _finite_bounds(space: Any) -> tuple[np.ndarray, np.ndarray]:
    """A Box's bounds with unbounded sides at -1 and 1 (where a uniform draw can reach)."""
    return (np.where(np.isfinite(space.low), space.low, -1.0),
            np.where(np.isfinite(space.high), space.high, 1.0))


def masked_uniform(rng: np.random.Generator, mask: np.ndarray | None,
                   shape: tuple[int, int] | None = None) -> np.ndarray:
    """One legal index per row, uniformly; rows with no legal action pick index 0.

    ``mask`` None: every action of a ``shape`` ``[n, actions]`` is legal (the same draws as
    an all-True mask).
    """
    if mask is None or mask.all():
        n, k = mask.shape if mask is not None else shape or (None, None)
        if n is None:
            raise ValueError("masked_uniform: give a mask or, for all actions legal, a shape")
        # One uniform number per row, scaled: ``integers`` costs several times more per call.
        return (rng.random(n) * k).astype(np.int64)
    scores = rng.random(mask.shape)
    scores[~mask] = -1.0
    return scores.argmax(axis=1).astype(np.int64, copy=False)


def as_opponent(actor: Any) -> Any:
    """``actor`` as it plays another learner's opponent: without what it keeps only to learn
    (an on-policy learner's teacher, ``untaught``)."""
    untaught = getattr(actor, "untaught", None)
    return untaught() if callable(untaught) else actor


class ScriptedActor:
    """A user's ``fn(observation, agent_id) -> action``, given the env's own observation.

    A ``fn`` that takes an ``action_mask`` keyword (or ``**kwargs``) is also given the legal
    actions: a bool array of the action space's size (for MultiDiscrete, each dimension's
    in turn; for a Dict or Tuple, its discrete leaves' in the space's order), from the
    observation's ``action_mask`` or the env's ``info["action_mask"]``,
    all True when the env gives none; None for Box actions.

    ``legal_only``: an action the env's mask marks illegal is a :class:`ScriptedPolicyError`
    (an opponent's illegal move would otherwise end the game in a forfeit that each env
    scores its own way).
    """

    squashed = False
    wants_env_obs = True

    def __init__(self, spec: PolicySpec, fn: Callable[..., Any], legal_only: bool = False):
        self.spec = spec
        self.fn = fn
        self.legal_only = legal_only
        self.view = spec.action_view
        self.takes_mask = accepts_keyword(fn, "action_mask")
        self._all_legal = np.ones(self.view.mask_dim, bool)
        self._all_legal.flags.writeable = False

    def _name(self) -> str:
        return self.spec.config.fn or f"{self.fn.__module__}:{self.fn.__qualname__}"

    def act(self, batch: ActBatch, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        out = np.zeros((len(batch.agent_ids), *self.view.shape), self.view.dtype)
        space = self.spec.action_space
        masked = self.takes_mask and self.view.mask_dim > 0
        for i, (obs, agent) in enumerate(zip(batch.env_obs, batch.agent_ids, strict=True)):
            try:
                if not self.takes_mask:
                    action = self.fn(obs, agent)
                elif not masked:
                    action = self.fn(obs, agent, action_mask=None)
                else:
                    legal = batch.mask[i].copy() if batch.mask is not None else self._all_legal
                    action = self.fn(obs, agent, action_mask=legal)
            except Exception as exc:
                raise ScriptedPolicyError(
                    f"scripted policy {self._name()!r} raised {type(exc).__name__}: {exc} when "
                    f"acting for agent {agent!r} on an observation of type "
                    f"{type(obs).__name__}"
                ) from exc
            composite = self.view.kind == "composite"
            if not space.contains(action if composite else _as_env_value(action, space)):
                raise ScriptedPolicyError(
                    f"scripted policy {self._name()!r} returned {action!r} for agent "
                    f"{agent!r}, which is not in its action space {space}"
                )
            if composite:
                out[i] = from_env(self.view.leaves, action)
            else:
                out[i] = np.asarray(action) - (space.start if self.view.kind != "box" else 0)
            if self.legal_only and batch.mask is not None and not self._legal(out[i], batch.mask[i]):
                raise ScriptedPolicyError(
                    f"scripted policy {self._name()!r} chose action {action!r} for agent "
                    f"{agent!r}, which the env's action mask marks illegal (legal: "
                    f"{np.flatnonzero(batch.mask[i]).tolist()}, as indices into the mask)")
        return out, {}

    def _legal(self, index: np.ndarray, mask: np.ndarray) -> bool:
        """Whether the action at ``index`` (from 0) is legal under ``mask``."""
        if self.view.kind == "discrete":
            return bool(mask[int(index)])
        if self.view.kind == "multi_discrete":
            nvec = np.asarray(self.spec.action_space.nvec)
            starts = np.concatenate([[0], np.cumsum(nvec)[:-1]])
            return bool(mask[starts + np.asarray(index, np.int64)].all())
        if self.view.kind == "composite":
            return legal_in_row(self.view.leaves, index, mask)
        return True


def accepts_keyword(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` can be called with the keyword argument ``name``."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no signature to read (some built-ins)
        return False
    return any(p.kind is p.VAR_KEYWORD or (p.name == name and p.kind in (
        p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)) for p in params)


def _as_env_value(action: Any, space: Any) -> Any:
    if np.isscalar(action) or getattr(action, "shape", None) == ():
        return np.int64(action) if np.issubdtype(np.asarray(action).dtype, np.integer) else action
    return np.asarray(action, dtype=space.dtype)

"""A teacher for the on-policy learners (``algo.teacher``): a scripted player whose advice the
actor is also trained to follow, as in kickstarting.

While training, at every move a trained policy makes, the teacher is shown the env's own
observation (as a scripted policy is) and answers with a move, with several moves it finds
equally good (a list, for a Discrete action space), or with None where it has no advice. The
advice is kept beside the transition as a mask over the policy's choices. Each gradient step
then adds ``teacher_coef`` times the mean, over the advised rows, of minus the log of the
probability the policy gives the advised moves, the coefficient falling linearly to zero
over ``teacher_decay_steps`` env steps where that is set. With ``teacher_replay`` the latest
advised moves of earlier rollouts are kept too, and each gradient step also reads a draw of
them: the advice of one rollout is a few thousand positions, and the policy would otherwise
learn it afresh on each. The policy still learns from its own returns: the teacher shapes
where it starts and, with a coefficient that stays, what it falls back on where it is sure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

from interplay.algos.onpolicy.nets import ActorCritic, mask_tensor, tensor
from interplay.algos.onpolicy.samples import PolicySamples
from interplay.config.code import load_callable
from interplay.errors import ConfigError, ScriptedPolicyError
from interplay.nets.distributions import ActionDist
from interplay.run.actors import ActBatch, accepts_keyword
from interplay.run.mapping import PolicySpec

TAUGHT_KINDS = ("discrete", "multi_discrete")


class Teacher:
    """Asks a user's ``fn(observation, agent_id) -> advice`` about each row of a batch."""

    def __init__(self, spec: PolicySpec, fn: Callable[..., Any], name: str, sizes: list[int]):
        self.spec = spec
        self.fn = fn
        self.name = name
        self.sizes = sizes  # the choices of each categorical dimension, as the policy's
        self.starts = np.cumsum([0, *sizes[:-1]])
        self.takes_mask = accepts_keyword(fn, "action_mask")

    def advice(self, batch: ActBatch) -> np.ndarray:
        """``[n, sum(sizes)]``: True at each choice the teacher advises (a row all False where
        it gave no advice)."""
        out = np.zeros((len(batch.agent_ids), sum(self.sizes)), bool)
        for i, (obs, agent) in enumerate(zip(batch.env_obs, batch.agent_ids, strict=True)):
            legal = batch.mask[i] if batch.mask is not None else None
            try:
                said = (self.fn(obs, agent, action_mask=None if legal is None else legal.copy())
                        if self.takes_mask else self.fn(obs, agent))
            except Exception as exc:
                raise ScriptedPolicyError(
                    f"algo.teacher {self.name!r} raised {type(exc).__name__}: {exc} when asked "
                    f"about agent {agent!r}'s move") from exc
            if said is not None:
                out[i] = self._mask(said, agent)
                if legal is not None and (out[i] & ~legal).any():
                    raise ScriptedPolicyError(
                        f"algo.teacher {self.name!r} advised {said!r} for agent {agent!r}, "
                        "which the env's action mask marks illegal (legal: "
                        f"{np.flatnonzero(legal).tolist()}, as indices into the mask)")
        return out

    def _mask(self, said: Any, agent: str) -> np.ndarray:
        space = self.spec.action_space
        row = np.zeros(sum(self.sizes), bool)
        if len(self.sizes) == 1 and not np.isscalar(said) and np.ndim(said) == 1:
            moves = list(said)  # several moves, equally good
        else:
            moves = [said]
        for move in moves:
            value = np.asarray(move)
            if not (np.issubdtype(value.dtype, np.integer) and space.contains(
                    np.int64(value) if value.ndim == 0 else value.astype(space.dtype))):
                raise ScriptedPolicyError(
                    f"algo.teacher {self.name!r} advised {said!r} for agent {agent!r}, which "
                    f"is not a move (or a list of moves) in its action space {space}")
            index = value.ravel() - np.asarray(getattr(space, "start", 0)).ravel()
            row[self.starts + index] = True
        return row


def teachers(settings: Any, specs: dict[str, PolicySpec], policies: dict[str, Any]
             ) -> dict[str, Teacher]:
    """Each trained policy's teacher (none without ``algo.teacher``), refused by name where a
    policy's actions or network cannot be taught."""
    if settings.teacher is None:
        return {}
    fn = load_callable(settings.teacher, "algo.teacher")
    out = {}
    for pid, policy in policies.items():
        kind = specs[pid].action_view.kind
        if kind not in TAUGHT_KINDS:
            raise ConfigError(
                f"algo.teacher: policy {pid!r} acts in {specs[pid].action_space}; a teacher "
                "teaches Discrete and MultiDiscrete actions only")
        if policy.recurrent:
            raise ConfigError(
                f"algo.teacher: policy {pid!r} has a recurrent network; a teacher teaches "
                "feed-forward networks only (drop algo.model.recurrent or algo.teacher)")
        out[pid] = Teacher(specs[pid], fn, settings.teacher, policy.dist.sizes)
    return out


def teacher_coef(settings: Any, env_steps: int) -> float:
    """``teacher_coef``, falling linearly to zero over ``teacher_decay_steps``."""
    coef = float(settings.teacher_coef)
    if settings.teacher_decay_steps:
        coef *= max(0.0, 1.0 - env_steps / settings.teacher_decay_steps)
    return coef


class Advised(NamedTuple):
    """Rows a teacher advised on: the actor's outputs for them now, the legal actions (None
    when every action is legal) and the advice."""

    out: torch.Tensor
    mask: torch.Tensor | None
    advice: torch.Tensor


def teacher_cross_entropy(dist: ActionDist, rows: Advised, replayed: Advised | None = None
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Minus the log of the probability the policy gives the advised choices, averaged over
    the advised rows of a minibatch (``rows``) and the rows drawn from the replay
    (``replayed``); and the share of the minibatch's rows advised."""
    logp, advised = dist.log_prob_any(*rows)
    share = advised.float().mean()
    picked = [logp[advised]]
    if replayed is not None:
        picked.append(dist.log_prob_any(*replayed)[0])
    logps = torch.cat(picked)
    if not len(logps):
        return logp.sum() * 0.0, share
    return -logps.mean(), share


class TeacherReplay:
    """The latest ``size`` rows of one policy that its teacher advised on (the observation as
    the env gave it, the agent's slot, the legal actions, the advice), kept across updates;
    each gradient step draws rows from it (with replacement, from its own random stream)."""

    def __init__(self, size: int, rng: np.random.Generator):
        self.size = size
        self.rng = rng
        self.rows: dict[str, np.ndarray] = {}
        self.count = 0  # rows held
        self.head = 0  # where the next row goes

    def add(self, s: PolicySamples) -> None:
        """Keep the advised rows of a rollout's samples, over the oldest once full."""
        if s.teacher is None:
            return
        advised = s.teacher.any(axis=1)
        legal = s.mask if s.mask is not None else np.ones_like(s.teacher)
        new = {"obs": s.raw_obs[advised], "slot": s.slot[advised],
               "mask": legal[advised].astype(bool), "advice": s.teacher[advised]}
        n = min(int(advised.sum()), self.size)
        if not n:
            return
        if not self.rows:
            self.rows = {k: np.zeros((self.size, *v.shape[1:]), v.dtype) for k, v in new.items()}
        at = (self.head + np.arange(n)) % self.size
        for key, values in new.items():
            self.rows[key][at] = values[-n:]
        self.head = int(at[-1] + 1) % self.size
        self.count = min(self.count + n, self.size)

    def draw(self, p: ActorCritic, n: int, device: str) -> Advised | None:
        """``n`` rows drawn at random, with policy ``p``'s outputs for them now."""
        if not self.count:
            return None
        i = self.rng.integers(0, self.count, n)
        obs = tensor(p.observe(self.rows["obs"][i]), device)
        out = p.actor(obs, tensor(self.rows["slot"][i], device))
        return Advised(out, mask_tensor(self.rows["mask"][i], device),
                       tensor(self.rows["advice"][i], device))

    def state_dict(self) -> dict[str, Any]:
        return {"rows": {k: v[:self.count].copy() for k, v in self.rows.items()},
                "count": self.count, "head": self.head, "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count, self.head = int(state["count"]), int(state["head"])
        self.rng.bit_generator.state = state["rng"]
        self.rows = {}
        for key, values in state["rows"].items():
            self.rows[key] = np.zeros((self.size, *values.shape[1:]), values.dtype)
            self.rows[key][:self.count] = values

"""A teacher for the on-policy learners (``algo.teacher``): a scripted player whose moves the
actor is also trained to make, as in kickstarting.

While training, at every move a trained policy makes, the teacher is asked what it would
play (it is given the env's own observation, as a scripted policy is); the move is kept
beside the transition. Each gradient step then adds ``teacher_coef`` times the
cross-entropy of the teacher's moves under the policy to the algorithm's loss, the
coefficient falling linearly to zero over ``teacher_decay_steps`` env steps where that is
set. The policy still learns from its own returns: the teacher shapes where it starts and,
with a coefficient that stays, what it falls back on.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from interplay.config.code import load_callable
from interplay.errors import ConfigError
from interplay.run.actors import ActBatch, ScriptedActor
from interplay.run.mapping import PolicySpec

TAUGHT_KINDS = ("discrete", "multi_discrete")


def teachers(settings: Any, specs: dict[str, PolicySpec], recurrent: dict[str, bool]
             ) -> dict[str, ScriptedActor]:
    """Each trained policy's teacher (none without ``algo.teacher``), refused by name where a
    policy's actions or network cannot be taught."""
    if settings.teacher is None:
        return {}
    fn = load_callable(settings.teacher, "algo.teacher")
    out = {}
    for pid, is_recurrent in recurrent.items():
        kind = specs[pid].action_view.kind
        if kind not in TAUGHT_KINDS:
            raise ConfigError(
                f"algo.teacher: policy {pid!r} acts in {specs[pid].action_space}; a teacher "
                "teaches Discrete and MultiDiscrete actions only")
        if is_recurrent:
            raise ConfigError(
                f"algo.teacher: policy {pid!r} has a recurrent network; a teacher teaches "
                "feed-forward networks only (drop algo.model.recurrent or algo.teacher)")
        out[pid] = ScriptedActor(specs[pid], fn, legal_only=True, abstains=True)
    return out


def teacher_moves(teacher: ScriptedActor, batch: ActBatch) -> np.ndarray:
    """What the teacher would play in each of the batch's rows (-1 where it gives no advice)."""
    return teacher.act(batch, explore=False)[0]


def teacher_coef(settings: Any, env_steps: int) -> float:
    """``teacher_coef``, falling linearly to zero over ``teacher_decay_steps``."""
    coef = float(settings.teacher_coef)
    if settings.teacher_decay_steps:
        coef *= max(0.0, 1.0 - env_steps / settings.teacher_decay_steps)
    return coef


def teacher_cross_entropy(dist: Any, out: torch.Tensor, mask: torch.Tensor | None,
                          moves: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean cross-entropy of the teacher's ``moves`` under the policy's outputs ``out``,
    over the rows it advised (-1: no advice), and the share of rows it advised."""
    advised = (moves >= 0).reshape(len(moves), -1).all(dim=1)
    logp, _ = dist.log_prob_entropy(out, mask, moves.clamp(min=0))
    share = advised.float().mean()
    if not advised.any():
        return logp.sum() * 0.0, share
    return -logp[advised].mean(), share

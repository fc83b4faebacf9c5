"""Acting for the on-policy learners: each policy's actions sampled from its actor (greedy when
not exploring), with their log-probabilities kept beside each transition."""

from __future__ import annotations

import numpy as np
import torch

from interplay.algos.onpolicy.nets import ActorCritic, tensor
from interplay.algos.onpolicy.recurrent import recurrent_act
from interplay.algos.onpolicy.teacher import Teacher
from interplay.run.actors import ActBatch


class OnPolicyActor:
    """Samples one policy's actions (greedy when not exploring) and keeps their log-probs;
    with a teacher, also its advice on each row while exploring (``teacher``)."""

    squashed = True  # Box actions live in [-1, 1] for the Gaussian; the runner maps them

    def __init__(self, policy: ActorCritic, rng: np.random.Generator, device: str,
                 teacher: Teacher | None = None):
        self.policy = policy
        self.rng = rng
        self.device = device
        self.teacher = teacher
        self.wants_env_obs = teacher is not None  # the teacher reads the env's observations
        # for callers that keep no recurrent state of their own
        self._recurrent_state: dict[str, np.ndarray] = {}

    def untaught(self) -> OnPolicyActor:
        """The same policy, acting with the same random stream, without a teacher: as an
        opponent plays it."""
        if self.teacher is None:
            return self
        return OnPolicyActor(self.policy, self.rng, self.device)

    def act(self, batch: ActBatch, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        p = self.policy
        n = batch.obs.shape[0]
        extras: dict[str, np.ndarray] = {}
        with torch.no_grad():
            obs = tensor(p.observe(batch.obs), self.device)
            slot = slots(batch, p)
            if p.recurrent:
                held = (batch.recurrent_state if batch.recurrent_state is not None
                        else self._recurrent_state)
                out, extras["state"] = recurrent_act(p.actor, batch, slot, len(p.spec.agents),
                                                     obs, held, self.device)
            else:
                # one network for every agent: which agent a row is does not matter
                out = p.actor(obs, tensor(slot, self.device) if p.actor.per_agent else None)
            mask = batch.mask if batch.mask is not None and not batch.mask.all() else None
            action, extras["logp"] = p.dist.act(out, mask, self.rng, explore)
        if explore and self.teacher is not None and batch.env_obs:
            # in training, where the runner hands the env's observations over to show it
            extras["teacher"] = self.teacher.advice(batch)
        view = p.spec.action_view
        return action.astype(view.dtype, copy=False).reshape(n, *view.shape), extras


def slots(batch: ActBatch, p: ActorCritic) -> np.ndarray:
    """Which of the policy's agents each row belongs to."""
    if batch.slot is not None:
        return batch.slot
    n, k = batch.obs.shape[0], len(p.spec.agents)
    if k == 1 or not p.actor.per_agent:
        return np.zeros(n, np.int64)
    if n % k:
        raise ValueError(f"policy {p.spec.id!r} has one network per agent, but the batch does "
                         "not say which agent each row belongs to (ActBatch.slot)")
    return np.arange(n) % k

"""``algo.name: a2c``: advantage actor-critic for groups of agents.

The on-policy base (:mod:`interplay.algos.onpolicy`) acts, collects each rollout, values it and
computes GAE advantages; A2C then follows the plain policy gradient: each action's
log-probability weighted by its advantage, beside the critic's value loss and an entropy
bonus. Without PPO's ratio and clip there is nothing to keep the policy near the one that
collected the rollout, so each rollout is learned from once, in one step, by default. With
``centralised_critic: true`` the critic also sees the joint observation of the agent's copy.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from interplay.algos.base import register
from interplay.algos.onpolicy import ActorCritic, LossTerms, Minibatch, OnPolicy, OnPolicySettings
from interplay.config.limits import MAX_COUNT, MAX_SIZE


class A2CSettings(OnPolicySettings):
    mutable: ClassVar[dict[str, tuple[float, float]]] = {
        "lr": (1e-5, 1e-2), "ent_coef": (0.0, 0.1), "gamma": (0.9, 0.999),
        "gae_lambda": (0.8, 1.0)}
    rollout: int = Field(16, ge=1, le=MAX_SIZE)
    """Steps of each copy per rollout (the T of its ``[T, E, k]`` arrays): an update comes
    every ``rollout`` × ``env.num_envs`` env steps."""
    epochs: int = Field(1, ge=1, le=MAX_COUNT)
    """Passes over each rollout per update (more than one learns again from actions an older
    policy took, which the plain policy gradient does not correct for)."""
    minibatches: int = Field(1, ge=1, le=MAX_SIZE)
    """Gradient steps per epoch (each on an equal share of the rollout)."""


@register
class A2C(OnPolicy):
    """Advantage actor-critic: the policy gradient weighted by GAE advantages."""

    name = "a2c"
    Settings = A2CSettings
    settings: A2CSettings
    loss_name = "A2C"
    metric_docs = {
        **OnPolicy.metric_docs,
        "policy_loss/<policy>": "minus the mean of each action's log-probability times its "
                                "advantage (A2C), mean over the update's gradient steps",
    }

    def loss(self, p: ActorCritic, mb: Minibatch) -> LossTerms:
        """The advantage-weighted policy-gradient loss, the value loss and the entropy bonus."""
        s = self.settings
        logp, entropy = p.dist.log_prob_entropy(mb.out, mb.mask, mb.action)
        policy_loss = -(logp * mb.advantage).mean()
        value_loss = 0.5 * (mb.value - mb.target).pow(2).mean()
        loss = policy_loss - s.ent_coef * entropy.mean() + s.vf_coef * value_loss
        return LossTerms(loss, policy_loss, value_loss, entropy.mean(), {})

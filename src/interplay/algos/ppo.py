"""``algo.name: ippo`` and ``mappo``: proximal policy optimisation for groups of agents.

One implementation; the two names are presets. Each trained policy has an actor and a critic
network, shared by all of its agents or one per agent. IPPO's critic sees what the agent sees;
MAPPO's also sees the joint observation of its env copy: the concatenation of what every agent
trained here saw in that step (for the MPE tasks that is exactly the env's global state).

Acting samples from the current policy with frozen observation statistics; each transition
keeps its log-probability. Every ``rollout`` steps, ``update`` evaluates the critic on the
stored observations and next observations, computes advantages per stream (see ``gae``),
then runs epochs × minibatches of clipped policy-gradient, value and entropy steps: the
loss below; the rest is the on-policy base (:mod:`interplay.algos.onpolicy`).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
from pydantic import Field, field_validator, model_validator

from interplay.algos.base import register
from interplay.algos.onpolicy import ActorCritic, LossTerms, Minibatch, OnPolicy, OnPolicySettings
from interplay.config.critic_model import CriticModelSettings, attention_reads_agents
from interplay.config.limits import MAX_COEF
from interplay.config.model import same_view_as_actors


class PPOSettings(OnPolicySettings):
    mutable: ClassVar[dict[str, tuple[float, float]]] = {
        "lr": (1e-5, 1e-2), "ent_coef": (0.0, 0.1), "clip": (0.05, 0.5), "gamma": (0.9, 0.999),
        "gae_lambda": (0.8, 1.0), "epochs": (1, 20), "minibatches": (1, 32)}
    clip: float = Field(0.2, gt=0, le=MAX_COEF)
    """PPO's clip range for the probability ratio."""


class MAPPOSettings(PPOSettings):
    uses_env_state: ClassVar[bool] = True  # the env is built to keep its global state
    centralised_critic: bool = True
    """The critic also sees the joint observation of the agent's env copy (MAPPO)."""
    state: Literal["auto", "env", "observations"] = "observations"
    """What the centralised critic sees beside the agent's own observation: ``observations``
    every trained agent's observation joined, ``env`` the env's own ``state()`` (a PettingZoo
    env with a Box ``state_space``; refused before any step for an env without one, such as
    the built-in batched envs), ``auto`` the env's state where it has a flat one, else the
    observations."""

    critic_model: CriticModelSettings | None = None
    """The critic, where it differs from ``model`` (none: the critic is built as the actor
    is), with the keys of MADDPG's ``algo.critic_model``; ``type: attention`` attends across every trained agent's observation, one value per
    agent, whichever agents are present (it sees observations as the actors do: resize,
    grayscale and layout are taken from ``model``)."""

    def critic_reads(self) -> str:
        return self.state

    @field_validator("critic_model")
    @classmethod
    def _critic_sees_what_actors_see(cls, value: CriticModelSettings | None
                                     ) -> CriticModelSettings | None:
        return value if value is None else same_view_as_actors(value)

    @model_validator(mode="after")
    def _attention_reads_agents(self) -> MAPPOSettings:
        if self.critic_model is not None and self.critic_model.attention:
            if not self.centralised_critic:
                raise ValueError("critic_model.type: attention is a centralised critic; set "
                                 "algo.centralised_critic: true")
            attention_reads_agents(self.critic_model, self.state)
        return self


class PPO(OnPolicy):
    family = "ppo"
    Settings = PPOSettings
    settings: PPOSettings
    loss_name = "PPO"
    metric_docs = {
        **OnPolicy.metric_docs,
        "policy_loss/<policy>": "the clipped surrogate policy loss, mean over epochs and minibatches",
        "approx_kl/<policy>": "the approximate KL divergence of the updated policy from the one "
                              "that collected the rollout, mean of (ratio - 1) - log(ratio)",
        "clip_frac/<policy>": "the fraction of samples whose probability ratio left "
                              "[1 - clip, 1 + clip]",
    }

    def loss(self, p: ActorCritic, mb: Minibatch) -> LossTerms:
        """The clipped surrogate policy loss, the value loss and the entropy bonus."""
        s = self.settings
        logp, entropy = p.dist.log_prob_entropy(mb.out, mb.mask, mb.action)
        log_ratio = logp - mb.old_logp
        ratio = log_ratio.exp()
        a = mb.advantage
        policy_loss = -torch.min(ratio * a, ratio.clamp(1 - s.clip, 1 + s.clip) * a).mean()
        value_loss = 0.5 * (mb.value - mb.target).pow(2).mean()
        loss = policy_loss - s.ent_coef * entropy.mean() + s.vf_coef * value_loss
        with torch.no_grad():
            kl = ((ratio - 1) - log_ratio).mean()
            clipped = ((ratio - 1).abs() > s.clip).float().mean()
        return LossTerms(loss, policy_loss, value_loss, entropy.mean(),
                         {"approx_kl": kl, "clip_frac": clipped})


@register
class IPPO(PPO):
    """Independent PPO: each critic sees only its own agent's observation."""

    name = "ippo"


@register
class MAPPO(PPO):
    """Multi-agent PPO: critics also see the joint observation of the env copy."""

    name = "mappo"
    Settings = MAPPOSettings
    centralised = True
    attention_critic = True

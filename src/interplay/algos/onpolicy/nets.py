"""A trained policy's actor and critic networks, for the on-policy learners.

Every on-policy learner here (:mod:`interplay.algos.onpolicy`) keeps, per trained policy, an
actor network (logits, or a Gaussian's mean and log-std) and a critic network (one value),
shared by all of the policy's agents or one per agent, feed-forward or recurrent; one Adam
optimiser over both; and running statistics that standardise observations and, optionally,
the critic's returns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch

from interplay.algos.base import tensor
from interplay.config.model import ModelSettings
from interplay.envs.images import is_image
from interplay.errors import ConfigError
from interplay.nets.agents import agent_nets, stacked_optimizer_state
from interplay.nets.build import ObsInput, network
from interplay.nets.distributions import ActionDist
from interplay.nets.normalize import LeafNorm, RunningMeanStd
from interplay.nets.recurrent import recurrent_net
from interplay.run.mapping import PolicySpec

OBS_CLIP = 10.0  # standardised observations are clipped to +-this


class NetSettings(Protocol):
    """The settings an :class:`ActorCritic` is built from."""

    share_params: bool
    log_std_init: float
    lr: float
    norm_obs: bool
    norm_value: bool


class ActorCritic:
    """One trained policy's actor and critic networks, their optimiser, and the running
    statistics of its observations and returns."""

    def __init__(self, spec: PolicySpec, s: NetSettings, own: ObsInput,
                 critic_in: list[tuple[ObsInput | int, int]], device: str,
                 critic_model: ModelSettings | None = None,
                 critic_net: Callable[[], torch.nn.Module] | None = None):
        """``critic_model``: the critic's settings where they differ from the actor's;
        ``critic_net``: a maker of a critic that serves every agent of the policy (it takes
        each row's slot), in place of one built from the settings."""
        k = len(spec.agents)
        self.spec = spec
        self.dist = ActionDist(spec.action_view)
        dist, model, where = self.dist, own.model, own.where
        critic_model, critic_where = ((model, where) if critic_model is None
                                      else (critic_model, "algo.critic_model"))
        self.model = model
        self.recurrent = model.recurrent != "none"
        if self.recurrent:
            if not s.share_params and k > 1:
                raise ConfigError(
                    f"algo.share_params: false with {where}.recurrent: {model.recurrent} "
                    f"(policy {spec.id!r}): recurrent policies share one network among their "
                    "agents")
            if critic_net is not None:
                raise ConfigError(
                    f"algo.critic_model.type: attention with {where}.recurrent: "
                    f"{model.recurrent} (policy {spec.id!r}): the attention critic is "
                    "feed-forward; set recurrent: none or another critic_model.type")
            self.actor: Any = recurrent_net(model, [(own, 1)], dist.net_out, 0.01, where,
                                            dist.head(s.log_std_init)).to(device)
            # the critic remembers as the actor does: one recurrent setting for both
            critic_model = critic_model.model_copy(update={
                key: getattr(model, key) for key in ("recurrent", "recurrent_size", "seq_len")})
            self.critic: Any = recurrent_net(critic_model, critic_in, 1, 1.0,
                                             critic_where).to(device)
        else:
            self.actor = agent_nets(lambda: torch.nn.Sequential(
                network(model, [(own, 1)], dist.net_out, 0.01, where),
                dist.head(s.log_std_init)), k, s.share_params).to(device)
            self.critic = (critic_net() if critic_net is not None else agent_nets(
                lambda: network(critic_model, critic_in, 1, 1.0, critic_where), k,
                s.share_params)).to(device)
        self.optimizer = torch.optim.Adam(
            [*self.actor.parameters(), *self.critic.parameters()], lr=s.lr, eps=1e-5)
        # Image frames are scaled to [0, 1] in the networks, not standardised; of a Dict
        # kept entry by entry only the float entries are.
        self.image = is_image(spec.obs_space)
        self.leaves = spec.obs_view.leaves
        self.obs_norm: RunningMeanStd | None = None
        if s.norm_obs and self.leaves is not None:
            self.obs_norm = LeafNorm(self.leaves, spec.config.stack_size)
        elif s.norm_obs and not self.image:
            self.obs_norm = RunningMeanStd((spec.obs_dim,))
        self.ret_norm = RunningMeanStd() if s.norm_value else None

    def observe(self, obs: np.ndarray) -> np.ndarray:
        """What the networks are handed: observations standardised with the frozen statistics,
        or image frames as they are (bytes stay bytes until the device)."""
        if self.image or (self.leaves is not None and self.obs_norm is None):
            return obs
        if self.obs_norm is None:
            return obs.astype(np.float32)
        return self.obs_norm.normalize(obs, OBS_CLIP)

    def return_units(self, v: torch.Tensor) -> np.ndarray:
        """The critic's outputs as returns (undoing ``norm_value``'s standardisation)."""
        out = v.cpu().numpy().astype(np.float64)
        if self.ret_norm is not None:
            out = out * self.ret_norm.std + self.ret_norm.mean
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "obs_norm": None if self.obs_norm is None else self.obs_norm.state_dict(),
            "ret_norm": None if self.ret_norm is None else self.ret_norm.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(
            stacked_optimizer_state(state["optimizer"], [self.actor, self.critic]))
        for norm, key in ((self.obs_norm, "obs_norm"), (self.ret_norm, "ret_norm")):
            if norm is not None:
                norm.load_state_dict(state[key])


def mask_tensor(mask: np.ndarray | None, device: str) -> torch.Tensor | None:
    """Legal actions as a tensor, or None when every action is legal (nothing to mask)."""
    if mask is None or mask.all():
        return None
    return tensor(mask, device)

"""``algo.name: maddpg`` and ``matd3``: deterministic actors, centralised critics, one replay.

One implementation; the two names are presets (MATD3 turns on twin critics, target policy
smoothing and delayed actor updates). Each trained policy has a deterministic actor shared by
its agents, each agent seeing only its own observation, and a critic (two with
``twin_critics``) that also sees the joint observation and joint action of every trained agent
of the env copy in that step. A critic row starts with its agent's own observation, action and
slot (one-hot), so one critic serves all of a policy's agents, each with its own reward. With
``algo.state`` the env's global state takes the joint observation's place, kept once per joint
row (and once more after it, for the targets). Agents of fixed policies (random, scripted) are
part of the env as far as the critics know.

Box actions: tanh outputs in [-1, 1], which the runner maps onto the space's bounds; exploring
adds Gaussian or Ornstein-Uhlenbeck noise (one OU process per copy and agent, restarted when
that agent's episode ends) and clips to [-1, 1]. Discrete actions: the actor gives logits;
acting takes the best legal action, or when exploring draws one from the softmax over the
legal actions (Gumbel-max); the critics see one-hot actions, and the actor loss and the target
actions use straight-through Gumbel-softmax samples (one-hot forward, the tempered softmax's
gradient backward) with illegal actions masked out.

The runner hands over each policy's transitions separately (those of one step, or of whole
episodes when they end); ``ready``, which the loop asks once per step, joins them by runner step
and env copy into joint rows (see ``JointReplayBuffer``). So every
trained agent must close a transition in every step of its copy: simultaneous moves, no agent
leaving early or joining late. An env that breaks this is stopped with the agent, copy and env
step named, rather than learnt from with holes in the critics' inputs.

Every ``train_every`` env steps from env step ``learning_starts`` on, ``gradient_steps`` times: draw a
batch of joint rows; take target actions from the target actors at the next observations (Box:
plus Gaussian noise of scale ``target_noise`` clipped to ``target_noise_clip``); regress each
policy's critics on r + gamma * min_i Q'_i(next), not bootstrapped where the agent's episode
terminated, bootstrapped where it was truncated; every ``policy_delay``-th gradient step, each
actor climbs its first critic with its agent's action replaced by the actor's (the other agents'
as stored), and every target network moves ``tau`` of the way to its online network.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from pydantic import Field
from torch import nn

from interplay.algos.actor_critic import (
    ActorCriticActor,
    ActorCriticModels,
    ActorCriticNets,
    CentralCritics,
    Columns,
    CriticMaker,
    States,
    columns,
    gumbel_noise,
    sampled_states,
)
from interplay.algos.base import WarmParts, register
from interplay.algos.offpolicy import ReplaySettings, default, follow_all
from interplay.config.algo import CriticStateSettings
from interplay.config.limits import MAX_COEF, MAX_COUNT, MAX_LR, MAX_STEPS
from interplay.data.replay import GroupRows, JointReplay
from interplay.nets.build import ObsInput, network
from interplay.nets.distributions import MASKED
from interplay.nets.greedy import GreedyQ
from interplay.run.actors import ActBatch
from interplay.run.mapping import PolicySpec
from interplay.run.transitions import Transitions
from interplay.seeding import rng_for


class MADDPGSettings(ReplaySettings, CriticStateSettings, ActorCriticModels):
    mutable: ClassVar[dict[str, tuple[float, float]]] = {
        "lr_actor": (1e-5, 1e-2), "lr_critic": (1e-5, 1e-2), "batch_size": (64, 4096),
        "gamma": (0.9, 0.999), "tau": (0.001, 0.1), "noise_scale": (0.0, 0.5)}
    gamma: float = default("gamma", 0.95)
    tau: float = default("tau", 0.01)
    batch_size: int = default("batch_size", 1024)
    buffer_size: int = default("buffer_size", 200_000)
    learning_starts: int = default("learning_starts", 100)
    lr_actor: float = Field(1e-3, gt=0, le=MAX_LR)
    """Adam's learning rate for the actors."""
    lr_critic: float = Field(1e-3, gt=0, le=MAX_LR)
    """Adam's learning rate for the critics."""
    policy_delay: int = Field(1, ge=1, le=MAX_COUNT)
    """Gradient steps per actor and target update (TD3's delayed policy updates)."""
    twin_critics: bool = False
    """Two critics per policy; targets take the smaller of their two values (TD3)."""
    target_noise: float = Field(0.0, ge=0, le=MAX_COEF)
    """Scale of the Gaussian noise on target actions (TD3's target policy smoothing; Box only)."""
    target_noise_clip: float = Field(0.5, ge=0, le=MAX_COEF)
    """The target noise is clipped to +-this before the actions are clipped to [-1, 1]."""
    noise: Literal["gaussian", "ou"] = "gaussian"
    """Exploration noise on Box actions: independent Gaussian, or Ornstein-Uhlenbeck per agent."""
    noise_scale: float = Field(0.1, ge=0, le=MAX_COEF)
    """The Gaussian's std, or the OU process's sigma, in the actor's [-1, 1] units."""
    noise_scale_end: float = Field(0.1, ge=0, le=MAX_COEF)
    """The noise scale after ``noise_decay_steps`` env steps and from then on."""
    noise_decay_steps: int = Field(0, ge=0, le=MAX_STEPS)
    """Env steps over which the noise scale moves linearly to its end value; 0 keeps it at
    the start."""
    ou_theta: float = Field(0.15, gt=0, le=MAX_COEF)
    """OU's pull towards zero per unit of time."""
    ou_dt: float = Field(1e-2, gt=0, le=1.0)
    """OU's time per step: x += -theta * x * dt + sigma * sqrt(dt) * N(0, 1)."""
    gumbel_temperature: float = Field(1.0, gt=0, le=MAX_COEF)
    """Temperature of the Gumbel-softmax for discrete actions."""
    max_grad_norm: float = Field(0.5, gt=0, le=MAX_COEF)
    """Gradient-norm clip, per actor and per policy's critics."""


class MATD3Settings(MADDPGSettings):
    policy_delay: int = Field(2, ge=1, le=MAX_COUNT)
    """Gradient steps per actor and target update (TD3's delayed policy updates)."""
    twin_critics: bool = True
    """Two critics per policy; targets take the smaller of their two values (TD3)."""
    target_noise: float = Field(0.2, ge=0, le=MAX_COEF)
    """Scale of the Gaussian noise on target actions (TD3's target policy smoothing; Box only)."""


# -- networks ---------------------------------------------------------------------------------
class DDPGNets(ActorCriticNets):
    """One trained policy's deterministic actor, critics, their targets and optimisers, and
    the OU noise state of its agents in each copy."""

    def __init__(self, spec: PolicySpec, s: MADDPGSettings, own: ObsInput,
                 make_critic: CriticMaker, seed: int, name: str, device: str):
        super().__init__(spec, seed, name)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(rng_for(seed, name, "init", spec.id).integers(2**63)))
            body = network(own.model, [(own, 1)], self.act_dim, 0.01, own.where)
            self.actor = (body if self.discrete else nn.Sequential(body, nn.Tanh())).to(device)
            self.critics = nn.ModuleList(
                [make_critic(1, 1.0) for _ in range(2 if s.twin_critics else 1)]
            ).to(device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_targets = copy.deepcopy(self.critics).requires_grad_(False)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=s.lr_actor)
        self.critic_opt = torch.optim.Adam(self.critics.parameters(), lr=s.lr_critic)
        self.ou = np.zeros((0, self.k, self.act_dim), np.float32)  # [copies, agents, act_dim]

    def nets(self) -> dict[str, nn.Module | torch.optim.Optimizer]:
        return {"actor": self.actor, "critics": self.critics, "actor_target": self.actor_target,
                "critic_targets": self.critic_targets, "actor_opt": self.actor_opt,
                "critic_opt": self.critic_opt}

    def extra_state(self) -> dict[str, Any]:
        return {"ou": self.ou}

    def load_extra_state(self, saved: dict[str, Any]) -> None:
        self.ou = np.array(saved["ou"], np.float32)


def gumbel_softmax(logits: torch.Tensor, mask: torch.Tensor | None, temperature: float,
                   rng: np.random.Generator) -> torch.Tensor:
    """Straight-through Gumbel-softmax samples: one-hot rows whose gradient is that of the
    tempered softmax of (logits + Gumbel noise); illegal actions are never drawn."""
    if mask is not None:
        logits = logits.masked_fill(~mask, MASKED)
    gumbel = torch.from_numpy(gumbel_noise(rng, logits.shape)).to(logits.device)
    soft = torch.softmax((logits + gumbel) / temperature, dim=-1)
    hard = nn.functional.one_hot(soft.argmax(dim=-1), logits.shape[-1]).to(soft.dtype)
    return hard - soft.detach() + soft


def critic_target(critic_targets: nn.ModuleList, next_input: torch.Tensor, reward: torch.Tensor,
                  terminated: torch.Tensor, gamma: float) -> torch.Tensor:
    """r + gamma * min_i Q'_i(next), without the bootstrap where the episode terminated."""
    with torch.no_grad():
        q_next = torch.stack([q(next_input).squeeze(-1) for q in critic_targets]).min(dim=0).values
        return reward + gamma * torch.where(terminated, torch.zeros_like(q_next), q_next)


def smoothed(action: torch.Tensor, scale: float, clip: float,
             rng: np.random.Generator) -> torch.Tensor:
    """Box target actions plus Gaussian noise clipped to +-clip, clipped back into [-1, 1]."""
    if scale == 0:
        return action
    noise = torch.from_numpy(rng.standard_normal(action.shape).astype(np.float32) * scale)
    return (action + noise.to(action.device).clamp(-clip, clip)).clamp(-1.0, 1.0)


# -- acting -----------------------------------------------------------------------------------
class MADDPGActor(ActorCriticActor):
    """The deterministic policy, plus exploration noise (Box) or sampling (discrete)."""

    algo: MADDPG

    def box(self, out: np.ndarray, batch: ActBatch, explore: bool) -> np.ndarray:
        if explore:
            return np.clip(out + self.algo.noise(self.policy, batch), -1.0, 1.0)
        return out


# -- the algorithm: collect, join, learn ------------------------------------------------------
@register
class MADDPG(CentralCritics):
    name = "maddpg"
    family = "ddpg"
    Settings = MADDPGSettings
    settings: MADDPGSettings
    action_kinds = frozenset({"discrete", "box"})
    gauges = frozenset({"buffer_size"})
    metric_docs = {
        "noise_scale": "the scale of the exploration noise (see `algo.noise_decay_steps`)",
        "buffer_size": "joint transitions held in the shared replay buffer",
        "critic_loss/<policy>": "the mean squared error of the policy's critics against their "
                                "targets, mean over its critics",
        "q_mean/<policy>": "the first critic's mean Q-value of the sampled joint actions",
        "actor_loss/<policy>": "minus the first critic's value of the actor's actions; only "
                               "in updates that trained the actor (see `algo.policy_delay`)",
    }
    Actor = MADDPGActor
    policies: dict[str, DDPGNets]

    def make_nets(self, pid: str, inputs: dict[str, ObsInput]) -> DDPGNets:
        return DDPGNets(self.specs[pid], self.settings, inputs[pid],
                        self.critic_maker(pid, inputs), self.seed, self.name, self.device)

    # -- exploration ------------------------------------------------------------------------
    def noise_scale(self) -> float:
        s = self.settings
        steps = self.schedule.env_steps
        frac = min(1.0, steps / s.noise_decay_steps) if s.noise_decay_steps else 0.0
        return s.noise_scale + frac * (s.noise_scale_end - s.noise_scale)

    def noise(self, p: DDPGNets, batch: ActBatch) -> np.ndarray:
        """Exploration noise for the rows of ``batch``: Gaussian, or each row's OU process."""
        s = self.settings
        shape = (batch.obs.shape[0], p.act_dim)
        scale = self.noise_scale()
        if s.noise == "gaussian":
            return scale * p.act_rng.standard_normal(shape, np.float32)
        env, slot = batch.env, batch.slot
        if env is None or slot is None:
            raise ValueError(f"policy {p.spec.id!r}: OU noise follows each copy and agent, but "
                             "the batch does not say which row is which (ActBatch.env, .slot)")
        if p.ou.shape[0] <= env.max():
            p.ou = np.concatenate([p.ou, np.zeros((env.max() + 1 - p.ou.shape[0], *p.ou.shape[1:]),
                                                  np.float32)])
        x = p.ou[env, slot]
        x += (-s.ou_theta * s.ou_dt * x
              + scale * np.sqrt(s.ou_dt) * p.act_rng.standard_normal(shape, np.float32))
        p.ou[env, slot] = x
        return x

    def collect(self, pid: str, batch: Transitions) -> None:
        if pid not in self.policies or not len(batch):
            return
        p = self.policies[pid]
        ended = batch.terminated | batch.truncated
        if ended.any():  # their OU processes restart with the next episode
            e, j = batch.env[ended], batch.slot[ended]
            known = e < p.ou.shape[0]
            p.ou[e[known], j[known]] = 0.0

    # -- learning ---------------------------------------------------------------------------
    def update(self, storage: JointReplay) -> dict[str, float]:
        s = self.settings
        active = [pid for pid in self.policies if pid not in self.frozen]
        sums = {pid: np.zeros(3) for pid in active}
        actor_steps = 0
        steps = self.take_steps()
        for _ in range(steps):
            index, rows, _ = storage.buffer.sample(s.batch_size, self.sample_rng)
            self.updates += 1
            delayed = self.updates % s.policy_delay == 0
            batch = self._tensors(rows)
            states = sampled_states(storage.buffer, index, self.device, self.env_state)
            next_act = self._target_actions(batch)
            for pid in active:
                sums[pid][:2] += self._learn_critic(pid, batch, next_act, states)
            if delayed:
                actor_steps += 1
                for pid in active:
                    sums[pid][2] += self._learn_actor(pid, batch, states)
                for p in (self.policies[pid] for pid in active):
                    follow_all([(p.actor_target, p.actor), (p.critic_targets, p.critics)], s.tau)
        metrics: dict[str, float] = {"noise_scale": self.noise_scale(),
                                     "buffer_size": float(len(storage))}
        for pid, (critic_loss, q_mean, actor_loss) in sums.items():
            metrics[f"critic_loss/{pid}"] = critic_loss / steps
            metrics[f"q_mean/{pid}"] = q_mean / steps
            if actor_steps:
                metrics[f"actor_loss/{pid}"] = actor_loss / actor_steps
        return metrics

    def _tensors(self, rows: dict[str, GroupRows]) -> dict[str, Columns]:
        """Each policy's sampled columns as tensors ``[b, agents, ...]``."""
        return {pid: columns(r, self.policies[pid].act_dim, self.policies[pid].discrete,
                             self.device) for pid, r in rows.items()}

    def _policy_actions(self, p: DDPGNets, net: nn.Module, obs: torch.Tensor,
                        mask: torch.Tensor | None, smooth: bool) -> torch.Tensor:
        """``net``'s actions for observations ``[b, agents, obs_dim]`` as the critics see them."""
        out = net(obs)
        s = self.settings
        if p.discrete:
            return gumbel_softmax(out, mask, s.gumbel_temperature, self.sample_rng)
        if smooth:
            return smoothed(out, s.target_noise, s.target_noise_clip, self.sample_rng)
        return out

    def _target_actions(self, batch: dict[str, Columns]) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return {pid: self._policy_actions(p, p.actor_target, batch[pid].next_obs,
                                              batch[pid].next_mask, smooth=True)
                    for pid, p in self.policies.items()}

    def _learn_critic(self, pid: str, batch: dict[str, Columns],
                      next_act: dict[str, torch.Tensor], states: States | None) -> np.ndarray:
        s = self.settings
        p = self.policies[pid]
        mine = batch[pid]
        obs = {q: batch[q].obs for q in self.trained}
        act = {q: batch[q].action for q in self.trained}
        next_obs = {q: batch[q].next_obs for q in self.trained}
        now, after = (None, None) if states is None else states
        target = critic_target(p.critic_targets,
                               self.critic_input(pid, next_obs, next_act, state=after),
                               mine.reward, mine.terminated, s.gamma)
        x = self.critic_input(pid, obs, act, state=now)
        qs = [q(x).squeeze(-1) for q in p.critics]
        loss = sum(nn.functional.mse_loss(q, target) for q in qs)
        assert isinstance(loss, torch.Tensor)
        self.check_loss(pid, "critic loss", loss)
        p.critic_opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(p.critics.parameters(), s.max_grad_norm)
        p.critic_opt.step()
        return np.array([loss.item() / len(qs), qs[0].mean().item()])

    def _learn_actor(self, pid: str, batch: dict[str, Columns], states: States | None) -> float:
        s = self.settings
        p = self.policies[pid]
        mine = batch[pid]
        own = self._policy_actions(p, p.actor, mine.obs, mine.mask, smooth=False)
        obs = {q: batch[q].obs for q in self.trained}
        act = {q: batch[q].action for q in self.trained}
        x = self.critic_input(pid, obs, act, own, None if states is None else states.now)
        loss = -p.critics[0](x).mean()
        self.check_loss(pid, "actor loss", loss)
        p.actor_opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(p.actor.parameters(), s.max_grad_norm)
        p.actor_opt.step()
        return loss.item()

    # -- state ------------------------------------------------------------------------------
    def greedy_net(self, pid: str) -> GreedyQ:
        p = self.policies[pid]
        return GreedyQ(p.actor, discrete=p.discrete)

    def warm_parts(self, pid: str) -> WarmParts:
        p = self.policies[pid]
        return WarmParts({"actor": p.actor, "actor_target": p.actor_target},
                         {"critics": p.critics, "critic_targets": p.critic_targets})


@register
class MATD3(MADDPG):
    """MADDPG with twin critics, target policy smoothing and delayed actor updates."""

    name = "matd3"
    Settings = MATD3Settings

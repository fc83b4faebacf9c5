"""``algo.name: isac`` and ``masac``: soft actor-critic, independent or with centralised critics.

Maximum-entropy learners. Each trained policy has a stochastic actor shared by its agents, two
critics, a target network for each critic, and an entropy weight alpha. The two names differ in
what the critics see and where the rows come from:

* ``isac`` learns each policy on its own, from a replay buffer of its agents' transitions (as
  DQN does); a critic sees one agent's observation and gives the value of each of its actions
  (discrete), or sees its observation and action and gives one value (Box). Turn-based games
  are fine: an agent's transition runs from one of its turns to the next.
* ``masac`` learns from joint rows (one per env copy and step, every trained agent side by side,
  as MADDPG does); a critic row starts with its agent's own observation, action (one-hot for
  discrete) and slot (one-hot), then holds every trained agent's observation (or the env's
  global state, with ``algo.state``, kept once per joint row) and action, and the critic gives
  one value. So every trained agent must act in every step; turn-based envs
  are refused.

Box actions: a Gaussian (mean and clamped log-std from the actor) squashed by tanh into
[-1, 1], which the runner maps onto the space's bounds; its log-density is the Gaussian's less
the log of tanh's slope. Discrete actions: a categorical over the actor's logits, illegal
actions at probability 0; soft values are exact expectations over the policy's probabilities
(masac asks its critics once for each of the agent's actions). Acting draws from the policy
when exploring, and takes its mean (Box) or most likely legal action (discrete) in test phases
and ``interplay eval``.

Every ``train_every`` env steps from env step ``learning_starts`` on, ``gradient_steps`` times:
draw a batch (by priority with ``prioritized``); draw every trained policy's next actions from
its current actor at the next observations; regress each policy's critics on
r + gamma * V(next), V = min_i Q'_i - alpha * log pi (for discrete, the expectation under pi),
not bootstrapped where the agent's episode terminated (or it has no legal action left),
bootstrapped where it was truncated, each row's loss weighted by its importance weight; move
each actor towards min_i Q_i - alpha * log pi with its own action drawn afresh (the other
agents' as stored); with ``learn_alpha``, move log alpha so that the policy's entropy
approaches its target (Box: ``-action_dim * target_entropy_scale``; discrete:
``target_entropy_scale * log(legal actions)``); and move every target critic ``tau`` of the
way to its critic. A row's new priority is its |TD error|, averaged over the critics (and over
the agents of a joint row).

Every step count is in env steps, all copies together, as everywhere in interplay.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from gymnasium import spaces
from pydantic import Field, field_validator
from torch import nn

from interplay.algos.base import (
    Algorithm,
    WarmParts,
    read_state,
    register,
)
from interplay.algos.maddpg import (
    MADDPGActor,
    States,
    gumbel_noise,
    joint_view,
    sampled_states,
)
from interplay.algos.offpolicy import ReplaySchedule, follow, tensor
from interplay.config.algo import CriticStateSettings, PrioritySettings
from interplay.config.limits import MAX_COEF, MAX_COUNT, MAX_LR, MAX_SIZE, MAX_STEPS
from interplay.config.model import ModelSettings, same_view_as_actors
from interplay.data.replay import (
    JointReplay,
    PolicyReplay,
    joint_replay,
    policy_replay,
)
from interplay.envs.batch import state_dim
from interplay.errors import NonFiniteError
from interplay.nets.build import ObsInput, Part, model_key, network, obs_input, policy_model
from interplay.nets.distributions import MASKED
from interplay.nets.greedy import GreedyQ
from interplay.nets.inputs import obs_tensor
from interplay.run.actors import ActBatch
from interplay.run.mapping import PolicySpec
from interplay.seeding import rng_for

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
"""The actor's log-std is clamped to this range, so neither the density nor its gradient
blows up when a policy becomes near-deterministic or flat."""


def _relu(hidden: list[int]) -> Any:
    return lambda: ModelSettings(hidden=hidden, activation="relu")


class SACSettings(PrioritySettings):
    mutable: ClassVar[dict[str, tuple[float, float]]] = {
        "lr_actor": (1e-5, 1e-2), "lr_critic": (1e-5, 1e-2), "lr_alpha": (1e-5, 1e-2),
        "batch_size": (32, 4096), "gamma": (0.9, 0.999), "tau": (0.001, 0.1)}
    lr_actor: float = Field(3e-4, gt=0, le=MAX_LR)
    """Adam's learning rate for the actors."""
    lr_critic: float = Field(3e-4, gt=0, le=MAX_LR)
    """Adam's learning rate for the critics."""
    lr_alpha: float = Field(3e-4, gt=0, le=MAX_LR)
    """Adam's learning rate for log alpha (with ``learn_alpha``)."""
    gamma: float = Field(0.99, ge=0, le=1)
    """Discount per transition (per agent turn in turn-based envs)."""
    tau: float = Field(0.005, gt=0, le=1)
    """Each gradient step moves the target critics this far towards the critics."""
    batch_size: int = Field(256, ge=1, le=MAX_SIZE)
    """Rows per gradient step: transitions (isac) or joint rows, one per env copy and step
    (masac)."""
    buffer_size: int = Field(200_000, ge=1, le=MAX_SIZE)
    """Rows the replay buffer holds (isac: each policy's); the oldest go first."""
    save_buffer: bool = True
    """Keep the replay buffers in checkpoints, so that a resumed run continues exactly."""
    learning_starts: int = Field(1_000, ge=0, le=MAX_STEPS)
    """Env steps (all copies together) before the first learning round."""
    train_every: int = Field(1, ge=1, le=MAX_STEPS)
    """Env steps between two learning rounds; when the copies take more than this in one
    step of the loop, that step takes as many rounds, so learning keeps pace with the data."""
    gradient_steps: int = Field(1, ge=1, le=MAX_COUNT)
    """Gradient steps per learning round (each on every policy's critics, actor and alpha)."""
    learn_alpha: bool = True
    """Learn the entropy weight alpha so that each policy's entropy approaches its target;
    false keeps alpha at ``alpha``."""
    alpha: float = Field(0.2, gt=0, le=MAX_COEF)
    """The entropy weight at the start (and throughout, without ``learn_alpha``)."""
    target_entropy_scale: float | None = Field(None, ge=-MAX_COEF, le=MAX_COEF)
    """The entropy each policy is held near: ``-action_dim * scale`` for Box actions,
    ``scale * log(legal actions)`` for discrete ones; none takes 1.0 for Box actions (SAC's
    ``-action_dim``) and 0.5 for discrete ones."""
    max_grad_norm: float = Field(10.0, gt=0, le=MAX_COEF)
    """Gradient-norm clip, per actor and per policy's critics."""
    model: ModelSettings = Field(default_factory=_relu([64, 64]))
    """The actors, and how observations are prepared (``policies.<pid>.model`` overrides any
    of these for one policy)."""
    critic_model: ModelSettings = Field(default_factory=_relu([64, 64]))
    """The critics (they see observations as the actors do: resize, grayscale and layout are
    taken from ``model``)."""

    @field_validator("critic_model")
    @classmethod
    def _critics_see_what_actors_see(cls, value: ModelSettings) -> ModelSettings:
        return same_view_as_actors(value)


class MASACSettings(SACSettings, CriticStateSettings):
    """MASAC's settings: SAC's, and what its centralised critics see (``state``)."""


# -- the policy: squashed Gaussian or categorical ------------------------------------------------
@dataclass
class Draw:
    """Actions drawn from a policy, with what the losses need of the distribution."""

    action: torch.Tensor  # [..., act_dim] as the critics see it: squashed Box action, or one-hot
    log_prob: torch.Tensor  # Box: [...] log-density of the action; discrete: [..., n] of each action
    probs: torch.Tensor | None  # discrete: [..., n] the policy's probabilities; Box: None
    entropy: torch.Tensor  # [...] discrete: exact; Box: -log_prob, a one-draw estimate


def squashed_gaussian(mean: torch.Tensor, log_std: torch.Tensor,
                      noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``tanh(mean + std * noise)`` and its log-density, summed over the last axis.

    The density of a = tanh(u) is the Gaussian's at u divided by tanh's slope 1 - tanh(u)^2;
    log(1 - tanh(u)^2) is written as 2 (log 2 - u - softplus(-2u)), which stays finite where
    tanh rounds to +-1.
    """
    u = mean + log_std.exp() * noise
    gaussian = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    slope = (2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u))).sum(-1)
    return torch.tanh(u), gaussian - slope


def categorical(logits: torch.Tensor, mask: torch.Tensor | None,
                rng: np.random.Generator) -> Draw:
    """The categorical over ``logits`` with illegal actions at probability 0, and one-hot
    draws from it (Gumbel-max, so never an illegal action while any is legal)."""
    if mask is not None:
        logits = logits.masked_fill(~mask, MASKED)
    log_prob = torch.log_softmax(logits, dim=-1)
    probs = log_prob.exp()
    noise = torch.from_numpy(gumbel_noise(rng, tuple(logits.shape))).to(logits.device)
    pick = (logits.detach() + noise).argmax(dim=-1)
    action = nn.functional.one_hot(pick, logits.shape[-1]).to(probs.dtype)
    return Draw(action, log_prob, probs, -(probs * log_prob).sum(-1))


def soft_value(q: torch.Tensor, alpha: torch.Tensor | float, draw: Draw) -> torch.Tensor:
    """min_i Q_i - alpha * log pi at the drawn actions; for discrete actions its expectation
    under the policy. ``q`` is ``[critics, ..., 1]`` (Box) or ``[critics, ..., n]``."""
    low = q.min(dim=0).values
    if draw.probs is None:
        return low.squeeze(-1) - alpha * draw.log_prob
    return (draw.probs * (low - alpha * draw.log_prob)).sum(-1)


def soft_target(reward: torch.Tensor, bootstrap: torch.Tensor, gamma: float,
                value: torch.Tensor) -> torch.Tensor:
    """r + gamma * V(next), without the bootstrap where ``bootstrap`` is false."""
    return reward + gamma * torch.where(bootstrap, value, torch.zeros_like(value))


def weighted_mse(q: torch.Tensor, target: torch.Tensor,
                 weight: torch.Tensor | None) -> torch.Tensor:
    """The squared error of ``q`` against ``target``; with prioritised replay's importance
    weights (``[b]``), each row's error weighted by them."""
    each = (q - target).pow(2)
    if weight is None:
        return each.mean()
    return (each * weight.reshape(-1, *[1] * (each.dim() - 1))).mean()


def target_entropy(p: _Policy, mask: torch.Tensor | None) -> torch.Tensor | float:
    """The entropy alpha holds policy ``p`` near; for discrete actions, per row from the
    number of legal actions."""
    if not p.discrete:
        return -p.act_dim * p.entropy_scale
    if mask is None:
        return p.entropy_scale * math.log(p.act_dim)
    return p.entropy_scale * mask.sum(-1).clamp(min=1).float().log()


# -- networks -------------------------------------------------------------------------------------
class _Policy:
    """One trained policy: actor, twin critics and their targets, alpha, optimisers, RNGs."""

    def __init__(self, spec: PolicySpec, s: SACSettings, own: ObsInput, critic_in: list[Part],
                 critic_out: int, seed: int, name: str, device: str):
        view = spec.action_view
        self.spec = spec
        self.k = len(spec.agents)
        self.discrete = view.kind == "discrete"
        self.act_dim = view.mask_dim if self.discrete else int(np.prod(view.shape))
        scale = s.target_entropy_scale
        self.entropy_scale = (0.5 if self.discrete else 1.0) if scale is None else scale
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(rng_for(seed, name, "init", spec.id).integers(2**63)))
            width = self.act_dim if self.discrete else 2 * self.act_dim  # logits, or mean and log-std
            self.actor = network(own.model, [(own, 1)], width, 0.01, own.where).to(device)
            self.critics = nn.ModuleList(
                [network(s.critic_model, critic_in, critic_out, 1.0, "algo.critic_model")
                 for _ in range(2)]).to(device)
        self.critic_targets = copy.deepcopy(self.critics).requires_grad_(False)
        self.log_alpha = torch.tensor(math.log(s.alpha), device=device, requires_grad=True)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=s.lr_actor)
        self.critic_optimizer = torch.optim.Adam(self.critics.parameters(), lr=s.lr_critic)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=s.lr_alpha)
        self.act_rng = rng_for(seed, name, "act", spec.id)
        self.sample_rng = rng_for(seed, name, "sample", spec.id)

    def alpha(self) -> torch.Tensor:
        return self.log_alpha.detach().exp()

    def draw(self, obs: torch.Tensor, mask: torch.Tensor | None) -> Draw:
        """Actions for observations ``[..., obs_dim]``, reparameterised (Box) so that gradients
        reach the actor through them."""
        out = self.actor(obs)
        if self.discrete:
            return categorical(out, mask, self.sample_rng)
        mean, log_std = out.chunk(2, dim=-1)
        noise = torch.from_numpy(self.sample_rng.standard_normal(tuple(mean.shape), np.float32))
        action, log_prob = squashed_gaussian(mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX),
                                             noise.to(mean.device))
        return Draw(action, log_prob, None, -log_prob)

    def nets(self) -> dict[str, nn.Module | torch.optim.Optimizer]:
        return {"actor": self.actor, "critics": self.critics,
                "critic_targets": self.critic_targets, "actor_optimizer": self.actor_optimizer,
                "critic_optimizer": self.critic_optimizer,
                "alpha_optimizer": self.alpha_optimizer}


# -- acting ---------------------------------------------------------------------------------------
class SACActor(MADDPGActor):
    """Draws from the policy when exploring; its mean (Box) or most likely legal action when not."""

    def box(self, out: np.ndarray, batch: ActBatch, explore: bool) -> np.ndarray:
        p = self.policy
        mean, log_std = np.split(out, 2, axis=1)
        u = mean
        if explore:
            std = np.exp(np.clip(log_std, LOG_STD_MIN, LOG_STD_MAX))
            u = mean + std * p.act_rng.standard_normal(mean.shape, np.float32)
        return np.tanh(u)


# -- the algorithm: collect, learn ----------------------------------------------------------------
Columns = dict[str, torch.Tensor]
"""One policy's sampled rows as tensors, ``[b, ...]`` (isac) or ``[b, agents, ...]`` (masac)."""

_FIGURES = ("critic_loss", "q_mean", "actor_loss", "entropy")


@register
class ISAC(ReplaySchedule, Algorithm):
    """Soft actor-critic for each policy on its own, from a replay buffer of its agents'
    transitions."""

    name = "isac"
    family = "sac"
    Settings = SACSettings
    settings: SACSettings
    action_kinds = frozenset({"discrete", "box"})
    turn_based = True
    off_policy = True
    gauges = frozenset({"alpha", "buffer_size"})
    metric_docs = {
        "critic_loss/<policy>": "the squared error of the policy's two critics against their "
                                "soft targets (importance-weighted with prioritised replay), "
                                "mean over the critics",
        "q_mean/<policy>": "the first critic's mean value of the sampled actions",
        "actor_loss/<policy>": "alpha * log pi - min Q of actions drawn afresh (for discrete "
                               "actions, its expectation under the policy)",
        "entropy/<policy>": "the policy's entropy on the sampled observations (Box: minus the "
                            "log-density of the drawn action)",
        "alpha/<policy>": "the entropy weight after the last update",
        "buffer_size/<policy>": "transitions held in the policy's replay buffer",
    }

    def __init__(self, settings: SACSettings, specs: dict[str, PolicySpec], device: str,
                 seed: int):
        super().__init__(settings, specs, device, seed)
        self.trained = [pid for pid, spec in specs.items() if spec.trainable]
        inputs = {pid: obs_input(specs[pid], policy_model(settings, specs[pid]),
                                 model_key(specs[pid])) for pid in self.trained}
        self.policies = {pid: _Policy(specs[pid], settings, inputs[pid],
                                      *self._critic_shape(pid, inputs), seed, self.name, device)
                         for pid in self.trained}
        self._actors = {pid: SACActor(self, p) for pid, p in self.policies.items()}
        self.start_schedule()
        self.sample_rng = rng_for(seed, self.name, "sample")
        self.updates = 0  # gradient steps taken

    def actor(self, pid: str) -> SACActor:
        return self._actors[pid]

    def _critic_shape(self, pid: str, inputs: dict[str, ObsInput]) -> tuple[list[Part], int]:
        """The pieces of a critic row and the critic's output width: the agent's observation
        and one value per action (discrete), or observation and action and one value (Box)."""
        spec = self.specs[pid]
        if spec.action_view.kind == "discrete":
            return [(inputs[pid], 1)], _act_dim(spec)
        return [(inputs[pid], 1), (_act_dim(spec), 1)], 1

    def critic_input(self, pid: str, obs: dict[str, torch.Tensor], act: dict[str, torch.Tensor],
                     own: torch.Tensor | None = None,
                     state: torch.Tensor | None = None) -> torch.Tensor:
        """Critic rows for policy ``pid``: its observation, then (Box) its action, ``own``
        in place of the one in ``act`` when given (an independent critic reads no
        ``state``)."""
        if self.policies[pid].discrete:
            return obs[pid]
        return torch.cat([obs[pid], act[pid] if own is None else own], dim=-1)

    def critic_values(self, pid: str, nets: nn.ModuleList, obs: dict[str, torch.Tensor],
                      act: dict[str, torch.Tensor], own: torch.Tensor | None = None,
                      state: torch.Tensor | None = None) -> torch.Tensor:
        """``[critics, ..., n]``: each critic's value of every action of the agent
        (discrete), or ``[critics, ..., 1]``: of its action in ``act`` or ``own`` (Box)."""
        x = self.critic_input(pid, obs, act, own, state)
        return torch.stack([c(x) for c in nets])

    def taken_values(self, pid: str, obs: dict[str, torch.Tensor],
                     act: dict[str, torch.Tensor],
                     state: torch.Tensor | None = None) -> list[torch.Tensor]:
        """Each online critic's value ``[...]`` of the actions in ``act``."""
        p = self.policies[pid]
        x = self.critic_input(pid, obs, act, state=state)
        if p.discrete:
            return [(c(x) * act[pid]).sum(-1) for c in p.critics]
        return [c(x).squeeze(-1) for c in p.critics]

    # -- storage --------------------------------------------------------------------------------
    def make_storage(self, num_envs: int) -> PolicyReplay:
        """A replay buffer per trained policy, refused up front if the machine cannot hold them."""
        s = self.settings
        return policy_replay({pid: p.spec for pid, p in self.policies.items()}, s.buffer_size,
                             s.save_buffer,
                             (s.priority_alpha, s.priority_eps) if s.prioritized else None)

    # -- learning -------------------------------------------------------------------------------
    def update(self, storage: PolicyReplay) -> dict[str, float]:
        s = self.settings
        steps = self.take_steps()
        metrics: dict[str, float] = {}
        for pid, p in self.policies.items():
            buffer = storage.buffers[pid]
            if len(buffer) < s.batch_size or pid in self.frozen:
                continue
            sums = np.zeros(len(_FIGURES))
            for _ in range(steps):
                b = buffer.sample(s.batch_size, p.sample_rng, beta=s.beta(self.schedule.env_steps))
                batch = {pid: self._columns(p, b)}
                figures, errors = self._learn(batch, [pid], b.weight)
                buffer.update_priorities(b.index, errors)
                sums += figures[pid]
            metrics.update(self._report(pid, sums / steps))
            metrics[f"buffer_size/{pid}"] = float(len(buffer))
        return metrics

    def _columns(self, p: _Policy, rows: Any) -> Columns:
        """Sampled rows (a ``Sample`` or a ``GroupRows``) as tensors, actions as the critics
        see them (one-hot for discrete)."""
        dev = self.device
        action = tensor(rows.action, dev)
        lead = rows.reward.shape  # [b] or [b, agents]
        t: Columns = {
            "obs": obs_tensor(rows.obs, dev), "next_obs": obs_tensor(rows.next_obs, dev),
            "reward": tensor(rows.reward.astype(np.float32), dev),
            "action": (nn.functional.one_hot(action.long(), p.act_dim).float() if p.discrete
                       else action.reshape(*lead, p.act_dim)),
        }
        bootstrap = ~tensor(rows.terminated, dev)
        if rows.mask is not None:
            t["mask"] = tensor(rows.mask, dev)
        if rows.next_mask is not None:
            t["next_mask"] = tensor(rows.next_mask, dev)
            bootstrap &= t["next_mask"].any(dim=-1)  # no legal action left: nothing to bootstrap
        t["bootstrap"] = bootstrap
        return t

    def _learn(self, batch: dict[str, Columns], learners: list[str],
               weight: np.ndarray | None, states: States | None = None
               ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """One gradient step of each policy in ``learners`` on ``batch`` (which holds every
        policy a critic sees, and the env's global ``states`` of its rows when the critics
        read them): their figures (``_FIGURES``) and each row's mean |TD error|."""
        now, after = (None, None) if states is None else states
        s = self.settings
        self.updates += 1
        w = None if weight is None else torch.as_tensor(weight, dtype=torch.float32,
                                                        device=self.device)
        obs = {q: t["obs"] for q, t in batch.items()}
        act = {q: t["action"] for q, t in batch.items()}
        with torch.no_grad():
            draws = {q: self.policies[q].draw(t["next_obs"], t.get("next_mask"))
                     for q, t in batch.items()}
            next_obs = {q: t["next_obs"] for q, t in batch.items()}
            next_act = {q: d.action for q, d in draws.items()}
        figures: dict[str, np.ndarray] = {}
        errors = []
        for pid in learners:
            p, mine = self.policies[pid], batch[pid]
            with torch.no_grad():
                q_next = self.critic_values(pid, p.critic_targets, next_obs, next_act,
                                            state=after)
                target = soft_target(mine["reward"], mine["bootstrap"], s.gamma,
                                     soft_value(q_next, p.alpha(), draws[pid]))
            loss, q_mean, td = self._learn_critics(pid, obs, act, target, w, now)
            figures[pid] = np.array([loss, q_mean, 0.0, 0.0])
            errors.append(td.reshape(td.shape[0], -1).mean(dim=1))
        for pid in learners:
            figures[pid][2:] = self._learn_actor(pid, obs, act, batch[pid].get("mask"), now)
            follow(self.policies[pid].critic_targets, self.policies[pid].critics, s.tau)
        return figures, torch.stack(errors).mean(dim=0).cpu().numpy()

    def _learn_critics(self, pid: str, obs: dict[str, torch.Tensor],
                       act: dict[str, torch.Tensor], target: torch.Tensor,
                       weight: torch.Tensor | None,
                       state: torch.Tensor | None = None) -> tuple[float, float, torch.Tensor]:
        """One step of policy ``pid``'s critics towards ``target`` at the sampled rows: the
        loss per critic, the mean value, and each row's |TD error| averaged over the critics."""
        p = self.policies[pid]
        qs = self.taken_values(pid, obs, act, state)
        loss = torch.stack([weighted_mse(q, target, weight) for q in qs]).sum()
        self._check(pid, "critic loss", loss)
        p.critic_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(p.critics.parameters(), self.settings.max_grad_norm)
        p.critic_optimizer.step()
        td = torch.stack([(q.detach() - target).abs() for q in qs]).mean(dim=0)
        return loss.item() / len(qs), qs[0].mean().item(), td

    def _learn_actor(self, pid: str, obs: dict[str, torch.Tensor], act: dict[str, torch.Tensor],
                     mask: torch.Tensor | None, state: torch.Tensor | None = None) -> np.ndarray:
        """One step of policy ``pid``'s actor, then (``learn_alpha``) of its alpha: the actor
        loss and the policy's mean entropy."""
        s = self.settings
        p = self.policies[pid]
        draw = p.draw(obs[pid], mask)
        alpha = p.alpha()
        if p.discrete:  # every action's value is known; the expectation needs no draw
            with torch.no_grad():
                q = self.critic_values(pid, p.critics, obs, act, state=state).min(dim=0).values
            assert draw.probs is not None
            loss = (draw.probs * (alpha * draw.log_prob - q)).sum(-1).mean()
        else:
            q = self.critic_values(pid, p.critics, obs, act, draw.action, state).min(dim=0).values
            loss = (alpha * draw.log_prob - q.squeeze(-1)).mean()
        self._check(pid, "actor loss", loss)
        p.actor_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(p.actor.parameters(), s.max_grad_norm)
        p.actor_optimizer.step()
        entropy = draw.entropy.detach()
        if s.learn_alpha:  # log alpha falls while the entropy is above its target, and rises below
            alpha_loss = (p.log_alpha * (entropy - target_entropy(p, mask))).mean()
            p.alpha_optimizer.zero_grad(set_to_none=True)
            alpha_loss.backward()
            p.alpha_optimizer.step()
        return np.array([loss.item(), entropy.mean().item()])

    def _report(self, pid: str, means: np.ndarray) -> dict[str, float]:
        out = {f"{name}/{pid}": float(v) for name, v in zip(_FIGURES, means, strict=True)}
        out[f"alpha/{pid}"] = self.policies[pid].alpha().item()
        return out

    def _check(self, pid: str, what: str, loss: torch.Tensor) -> None:
        if not torch.isfinite(loss):
            raise NonFiniteError(
                f"policy {pid!r}: the {self.name} {what} is {loss.item()} at env step "
                f"{self.schedule.env_steps} (gradient step {self.updates}); check rewards and "
                "observations for huge values, or lower algo.lr_critic / algo.lr_actor")

    # -- state ----------------------------------------------------------------------------------
    def greedy_net(self, pid: str) -> GreedyQ:
        p = self.policies[pid]
        return GreedyQ(p.actor, discrete=p.discrete, box="tanh_mean")

    def warm_parts(self, pid: str) -> WarmParts:
        p = self.policies[pid]
        return WarmParts({"actor": p.actor}, {"critics": p.critics,
                                               "critic_targets": p.critic_targets,
                                               "log_alpha": p.log_alpha})

    def state_dict(self) -> dict[str, Any]:
        return copy.deepcopy({
            "schedule": self.schedule.state_dict(), "updates": self.updates,
            "sample_rng": self.sample_rng.bit_generator.state,
            "policies": {pid: {
                **{name: x.state_dict() for name, x in p.nets().items()},
                "log_alpha": p.log_alpha.detach().clone(),
                "act_rng": p.act_rng.bit_generator.state,
                "sample_rng": p.sample_rng.bit_generator.state,
            } for pid, p in self.policies.items()},
        })

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = copy.deepcopy(state)
        self.schedule.load_state_dict(state["schedule"])
        self.updates = state["updates"]
        self.sample_rng.bit_generator.state = state["sample_rng"]
        for pid, p in self.policies.items():
            saved = state["policies"][pid]
            for name, x in p.nets().items():
                x.load_state_dict(saved[name])
            with torch.no_grad():
                p.log_alpha.copy_(saved["log_alpha"])
            p.act_rng.bit_generator.state = saved["act_rng"]
            p.sample_rng.bit_generator.state = saved["sample_rng"]


@register
class MASAC(ISAC):
    """Soft actor-critic with centralised critics: each sees every trained agent's observation
    and the other agents' actions, from joint rows."""

    name = "masac"
    Settings = MASACSettings
    settings: MASACSettings
    turn_based = False
    metric_docs = {
        **{k: v for k, v in ISAC.metric_docs.items() if not k.startswith("buffer_size")},
        "buffer_size": "joint rows held in the shared replay buffer",
    }

    def __init__(self, settings: MASACSettings, specs: dict[str, PolicySpec], device: str,
                 seed: int, state_space: spaces.Box | None = None):
        """``state_space``: the global state the env keeps (None if it keeps none); the critics
        read it in place of the joined observations unless ``algo.state`` is
        ``observations``."""
        self.env_state = read_state(settings.state, state_space, "the critic")
        self.state_dim = state_dim(self.env_state)
        super().__init__(settings, specs, device, seed)

    def _critic_shape(self, pid: str, inputs: dict[str, ObsInput]) -> tuple[list[Part], int]:
        """Own observation, own action (one-hot for discrete), slot (one-hot, with several
        agents), every trained agent's observation (or the env's global state), every trained
        agent's action; one value."""
        joint_act = sum(len(self.specs[q].agents) * _act_dim(self.specs[q]) for q in self.trained)
        k = len(self.specs[pid].agents)
        joint: list[Part] = ([(self.state_dim, 1)] if self.env_state is not None else
                             [(inputs[q], len(self.specs[q].agents)) for q in self.trained])
        return [(inputs[pid], 1), (_act_dim(self.specs[pid]), 1), *([(k, 1)] if k > 1 else []),
                *joint, (joint_act, 1)], 1

    def critic_input(self, pid: str, obs: dict[str, torch.Tensor], act: dict[str, torch.Tensor],
                     own: torch.Tensor | None = None,
                     state: torch.Tensor | None = None) -> torch.Tensor:
        """Critic rows ``[b, agents, in]`` for policy ``pid``'s agents, agent j's row holding
        its observation, its action, its slot, then every trained agent's observation (or the
        env's global ``state`` ``[b, state_dim]``, with ``algo.state``) and action. ``own`` (``[b, agents, act_dim]``) replaces, in agent j's row, agent j's action
        in both places; the other agents' actions stay as in ``act``.

        Each agent's action keeps its place in the joint part in every row: a critic shared by
        the policy's agents then learns one effect of each agent's action, whichever row it
        values (with the row's own action taken out of the joint part instead, MASAC learned
        far more slowly on spread)."""
        b, k = obs[pid].shape[:2]
        dev = obs[pid].device
        mine = act[pid] if own is None else own
        cols = [obs[pid], mine]
        if k > 1:
            cols.append(torch.eye(k, device=dev).expand(b, k, k))
        cols.append(joint_view(obs, self.trained, state)[:, None].expand(b, k, -1))
        for q in self.trained:
            if q == pid and own is not None:
                eye = torch.eye(k, device=dev)[None, :, :, None]  # [1, row, agent, 1]
                cols.append((eye * own[:, None] + (1 - eye) * act[q][:, None]).reshape(b, k, -1))
            else:
                cols.append(act[q].reshape(b, 1, -1).expand(b, k, -1))
        return torch.cat(cols, dim=2)

    def critic_values(self, pid: str, nets: nn.ModuleList, obs: dict[str, torch.Tensor],
                      act: dict[str, torch.Tensor], own: torch.Tensor | None = None,
                      state: torch.Tensor | None = None) -> torch.Tensor:
        """As :meth:`ISAC.critic_values`; for discrete actions the critics are asked once
        for each of the agent's actions, the other agents' as in ``act``."""
        p = self.policies[pid]
        if not p.discrete:
            return super().critic_values(pid, nets, obs, act, own, state)
        b, k = obs[pid].shape[:2]
        each = torch.eye(p.act_dim, device=obs[pid].device)
        x = torch.stack([self.critic_input(pid, obs, act, each[a].expand(b, k, -1), state)
                         for a in range(p.act_dim)], dim=2)  # [b, agents, n, in]
        return torch.stack([c(x).squeeze(-1) for c in nets])

    def taken_values(self, pid: str, obs: dict[str, torch.Tensor],
                     act: dict[str, torch.Tensor],
                     state: torch.Tensor | None = None) -> list[torch.Tensor]:
        x = self.critic_input(pid, obs, act, state=state)
        return [c(x).squeeze(-1) for c in self.policies[pid].critics]

    def make_storage(self, num_envs: int) -> JointReplay:  # type: ignore[override]
        """One joint replay buffer of every trained agent (and of the env's global state, when
        the critics read it), refused up front if the machine cannot hold it."""
        s = self.settings
        return joint_replay({pid: p.spec for pid, p in self.policies.items()}, s.buffer_size,
                            f"algo.name: {self.name}", self.state_dim, s.save_buffer,
                            (s.priority_alpha, s.priority_eps) if s.prioritized else None)

    def update(self, storage: JointReplay) -> dict[str, float]:  # type: ignore[override]
        s = self.settings
        steps = self.take_steps()
        learners = [pid for pid in self.policies if pid not in self.frozen]
        metrics: dict[str, float] = {"buffer_size": float(len(storage))}
        if not learners:
            return metrics
        sums = {pid: np.zeros(len(_FIGURES)) for pid in learners}
        for _ in range(steps):
            index, rows, weight = storage.buffer.sample(s.batch_size, self.sample_rng,
                                                        s.beta(self.schedule.env_steps))
            batch = {pid: self._columns(p, rows[pid]) for pid, p in self.policies.items()}
            states = sampled_states(storage.buffer, index, self.device, self.env_state)
            figures, errors = self._learn(batch, learners, weight, states)
            storage.buffer.update_priorities(index, errors)
            for pid in learners:
                sums[pid] += figures[pid]
        for pid in learners:
            metrics.update(self._report(pid, sums[pid] / steps))
        return metrics


def _act_dim(spec: PolicySpec) -> int:
    """Width of one agent's action as the critics see it (one-hot for discrete)."""
    view = spec.action_view
    return view.mask_dim if view.kind == "discrete" else int(np.prod(view.shape))

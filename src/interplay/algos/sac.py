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
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
from pydantic import Field
from torch import nn

from interplay.algos.actor_critic import (
    ActorCritic,
    ActorCriticActor,
    ActorCriticModels,
    CentralCritics,
    Columns,
    CriticMaker,
    States,
    act_dim,
    columns,
    critic_maker,
    sampled_states,
)
from interplay.algos.base import WarmParts, register
from interplay.algos.offpolicy import ReplaySettings, default, follow, priority_of
from interplay.algos.soft import (
    LOG_STD_MAX,
    LOG_STD_MIN,
    Draw,
    SACNets,
    categorical,
    soft_target,
    soft_value,
    squashed_gaussian,
    target_entropy,
    weighted_mse,
)
from interplay.config.algo import CriticStateSettings, PrioritySettings
from interplay.config.limits import MAX_COEF, MAX_LR
from interplay.data.replay import JointReplay, PolicyReplay, policy_replay
from interplay.nets.build import ObsInput
from interplay.nets.greedy import GreedyQ
from interplay.run.actors import ActBatch

__all__ = ["ISAC", "MASAC", "Draw", "categorical", "soft_target", "soft_value",
           "squashed_gaussian", "weighted_mse"]


class SACSettings(ReplaySettings, PrioritySettings, ActorCriticModels):
    mutable: ClassVar[dict[str, tuple[float, float]]] = {
        "lr_actor": (1e-5, 1e-2), "lr_critic": (1e-5, 1e-2), "lr_alpha": (1e-5, 1e-2),
        "batch_size": (32, 4096), "gamma": (0.9, 0.999), "tau": (0.001, 0.1)}
    lr_actor: float = Field(3e-4, gt=0, le=MAX_LR)
    """Adam's learning rate for the actors."""
    lr_critic: float = Field(3e-4, gt=0, le=MAX_LR)
    """Adam's learning rate for the critics."""
    lr_alpha: float = Field(3e-4, gt=0, le=MAX_LR)
    """Adam's learning rate for log alpha (with ``learn_alpha``)."""
    tau: float = default("tau", 0.005)
    batch_size: int = default("batch_size", 256)
    buffer_size: int = default("buffer_size", 200_000)
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


class MASACSettings(SACSettings, CriticStateSettings):
    """MASAC's settings: SAC's, and what its centralised critics see (``state``)."""


# -- acting ---------------------------------------------------------------------------------------
class SACActor(ActorCriticActor):
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
_FIGURES = ("critic_loss", "q_mean", "actor_loss", "entropy")


@register
class ISAC(ActorCritic):
    """Soft actor-critic for each policy on its own, from a replay buffer of its agents'
    transitions."""

    name = "isac"
    family = "sac"
    Settings = SACSettings
    settings: SACSettings
    action_kinds = frozenset({"discrete", "box"})
    turn_based = True
    learns_from_members = True
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
    Actor = SACActor
    policies: dict[str, SACNets]

    def make_nets(self, pid: str, inputs: dict[str, ObsInput]) -> SACNets:
        return SACNets(self.specs[pid], self.settings, inputs[pid],
                       *self._critic_shape(pid, inputs), self.seed, self.name, self.device)

    def _critic_shape(self, pid: str, inputs: dict[str, ObsInput]) -> tuple[CriticMaker, int]:
        """A maker of critics and their output width: over the agent's observation, one value
        per action (discrete), or over observation and action, one value (Box)."""
        spec = self.specs[pid]
        model = self.settings.critic_model
        if spec.action_view.kind == "discrete":
            return critic_maker(model, [(inputs[pid], 1)]), act_dim(spec)
        return critic_maker(model, [(inputs[pid], 1), (act_dim(spec), 1)]), 1

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
                             s.save_buffer, priority_of(s))

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
                batch = {pid: columns(b, p.act_dim, p.discrete, self.device)}
                figures, errors = self._learn(batch, [pid], b.weight)
                buffer.update_priorities(b.index, errors)
                sums += figures[pid]
            metrics.update(self._report(pid, sums / steps))
            metrics[f"buffer_size/{pid}"] = float(len(buffer))
        return metrics

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
        obs = {q: t.obs for q, t in batch.items()}
        act = {q: t.action for q, t in batch.items()}
        with torch.no_grad():
            draws = {q: self.policies[q].draw(t.next_obs, t.next_mask) for q, t in batch.items()}
            next_obs = {q: t.next_obs for q, t in batch.items()}
            next_act = {q: d.action for q, d in draws.items()}
        figures: dict[str, np.ndarray] = {}
        errors = []
        for pid in learners:
            p, mine = self.policies[pid], batch[pid]
            with torch.no_grad():
                q_next = self.critic_values(pid, p.critic_targets, next_obs, next_act,
                                            state=after)
                target = soft_target(mine.reward, mine.bootstrap, s.gamma,
                                     soft_value(q_next, p.alpha(), draws[pid]))
            loss, q_mean, td = self._learn_critics(pid, obs, act, target, w, now)
            figures[pid] = np.array([loss, q_mean, 0.0, 0.0])
            errors.append(td.reshape(td.shape[0], -1).mean(dim=1))
        for pid in learners:
            figures[pid][2:] = self._learn_actor(pid, obs, act, batch[pid].mask, now)
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
        self.check_loss(pid, "critic loss", loss)
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
        self.check_loss(pid, "actor loss", loss)
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

    # -- state ----------------------------------------------------------------------------------
    def greedy_net(self, pid: str) -> GreedyQ:
        p = self.policies[pid]
        return GreedyQ(p.actor, discrete=p.discrete, box="tanh_mean")

    def warm_parts(self, pid: str) -> WarmParts:
        p = self.policies[pid]
        return WarmParts({"actor": p.actor}, {"critics": p.critics,
                                               "critic_targets": p.critic_targets,
                                               "log_alpha": p.log_alpha})


@register
class MASAC(CentralCritics, ISAC):  # type: ignore[misc]  # joint rows, not ISAC's replay
    """Soft actor-critic with centralised critics: each sees every trained agent's observation
    and the other agents' actions, from joint rows."""

    name = "masac"
    Settings = MASACSettings
    settings: MASACSettings
    metric_docs = {
        **{k: v for k, v in ISAC.metric_docs.items() if not k.startswith("buffer_size")},
        "buffer_size": "joint rows held in the shared replay buffer",
    }

    def _critic_shape(self, pid: str, inputs: dict[str, ObsInput]) -> tuple[CriticMaker, int]:
        """The centralised critic row (see :mod:`interplay.algos.actor_critic`); one value."""
        return self.critic_maker(pid, inputs), 1

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
        # [b, n, agents, in]: each action's rows of a step side by side along the agents, as
        # an attention critic reads a step's rows
        x = torch.stack([self.critic_input(pid, obs, act, each[a].expand(b, k, -1), state)
                         for a in range(p.act_dim)], dim=1)
        return torch.stack([c(x).squeeze(-1).transpose(1, 2) for c in nets])

    def taken_values(self, pid: str, obs: dict[str, torch.Tensor],
                     act: dict[str, torch.Tensor],
                     state: torch.Tensor | None = None) -> list[torch.Tensor]:
        x = self.critic_input(pid, obs, act, state=state)
        return [c(x).squeeze(-1) for c in self.policies[pid].critics]

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
            batch = {pid: columns(rows[pid], p.act_dim, p.discrete, self.device)
                     for pid, p in self.policies.items()}
            states = sampled_states(storage.buffer, index, self.device, self.env_state)
            figures, errors = self._learn(batch, learners, weight, states)
            storage.buffer.update_priorities(index, errors)
            for pid in learners:
                sums[pid] += figures[pid]
        for pid in learners:
            metrics.update(self._report(pid, sums[pid] / steps))
        return metrics


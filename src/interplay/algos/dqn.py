"""``algo.name: dqn``: deep Q-learning for discrete actions, one Q-network per trained policy.

Each trained policy has an online and a target network (dueling by default) shared by all of
its agents, an Adam optimiser and a replay buffer of its agents' transitions. Acting is
epsilon-greedy over the legal actions, epsilon falling linearly with the steps taken. Every
``train_every`` env steps after ``learning_starts``, each policy takes ``gradient_steps`` steps
on batches drawn uniformly from its buffer: n-step returns per agent stream (turn-based games
included: one transition per turn of the agent), bootstrapped with the target network at the
action the online network prefers among the legal ones at the next observation (double Q),
not bootstrapped where an agent's episode terminated, bootstrapped where it was truncated.

With ``model.recurrent: gru | lstm`` the Q-network carries each agent's state through its
episode, and learning draws sequences of ``model.seq_len`` of an agent's transitions after a
``burn_in`` (see :mod:`interplay.algos.recurrent_q`).
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import numpy as np
import torch
from pydantic import Field
from torch import nn

from interplay.algos.base import NetActor, WarmParts, register
from interplay.algos.offpolicy import OffPolicy, ReplaySettings, follow, priority_of, tensor
from interplay.algos.recurrent_q import (
    SequenceSettings,
    after_each,
    greedy_recurrent_q,
    n_step_targets,
    recurrent_q,
    recurrent_q_net,
    sequence_errors,
    sequence_weights,
    state_sizes,
    unroll,
)
from interplay.config.algo import PrioritySettings
from interplay.config.limits import MAX_COEF, MAX_COUNT, MAX_LR, MAX_STEPS
from interplay.config.model import ModelSettings
from interplay.data.replay import PolicyReplay, ReplayBuffer, Sample, policy_replay
from interplay.data.sequences import Windows, windows
from interplay.nets.build import (
    SpatialHead,
    check_network_fits,
    encoder,
    head_settings,
    mirrored,
    mlp_params,
    model_key,
    network,
    obs_input,
    policy_model,
)
from interplay.nets.greedy import GreedyQ
from interplay.nets.inputs import obs_tensor
from interplay.nets.mlp import ACTIVATIONS, mlp
from interplay.run.actors import ActBatch, masked_uniform
from interplay.run.mapping import PolicySpec
from interplay.seeding import rng_for


class DQNSettings(ReplaySettings, PrioritySettings, SequenceSettings):
    mutable: ClassVar[dict[str, tuple[float, float]]] = {
        "lr": (1e-5, 1e-2), "batch_size": (16, 512), "gamma": (0.9, 0.999),
        "train_every": (1, 16), "epsilon_end": (0.0, 0.2), "target_every": (50, 5000)}
    lr: float = Field(5e-4, gt=0, le=MAX_LR)
    """Adam's learning rate."""
    n_step: int = Field(1, ge=1, le=MAX_COUNT)
    """Transitions of one agent folded into each return before bootstrapping."""
    target_every: int = Field(500, ge=1, le=MAX_STEPS)
    """Gradient steps between two target-network updates."""
    double: bool = True
    """Double Q-learning: the online network picks the next action, the target values it."""
    dueling: bool = True
    """Dueling head: Q = V + A - mean(A)."""
    epsilon_start: float = Field(1.0, ge=0, le=1)
    """Chance of a uniformly random legal action at the start."""
    epsilon_end: float = Field(0.05, ge=0, le=1)
    """That chance after ``exploration_steps`` and from then on."""
    exploration_steps: int = Field(10_000, ge=0, le=MAX_STEPS)
    """Env steps (all copies together) over which epsilon falls linearly from start to end."""
    max_grad_norm: float = Field(10.0, gt=0, le=MAX_COEF)
    """Gradient-norm clip."""
    huber_delta: float = Field(1.0, gt=0, le=MAX_COEF)
    """Where the Huber loss turns from quadratic to linear."""
    model: ModelSettings = Field(
        default_factory=lambda: ModelSettings(hidden=[128, 128], activation="relu"))
    """The Q-networks (``policies.<pid>.model`` overrides any of these for one policy)."""


def weighted_huber(q: torch.Tensor, target: torch.Tensor, delta: float,
                   weight: np.ndarray | None) -> torch.Tensor:
    """The Huber loss of ``q`` against ``target``; with prioritised replay's importance weights,
    each row's loss weighted by them."""
    if weight is None:
        return nn.functional.huber_loss(q, target, delta=delta)
    each = nn.functional.huber_loss(q, target, delta=delta, reduction="none")
    return (each * torch.as_tensor(weight, dtype=each.dtype, device=each.device)).mean()


# -- networks ---------------------------------------------------------------------------------
class QNet(nn.Module):
    """Observation -> one value per action, with an optional dueling head.

    ``encoder`` (a CNN, a user's module), when given, comes first and gives ``obs_dim``
    features."""

    def __init__(self, obs_dim: int, n_actions: int, net: ModelSettings, dueling: bool,
                 encoder: nn.Module | None = None):
        super().__init__()
        *body, width = net.hidden or [obs_dim]
        if net.hidden:
            trunk = net.model_copy(update={"hidden": body})
            self.trunk = nn.Sequential(mlp(obs_dim, width, trunk, np.sqrt(2)),
                                       ACTIVATIONS[net.activation]())
        else:
            self.trunk = nn.Identity()
        if encoder is not None:
            self.trunk = nn.Sequential(encoder, self.trunk)
        head = net.model_copy(update={"hidden": []})
        self.advantage = mlp(width, n_actions, head, 1.0)
        self.value = mlp(width, 1, head, 1.0) if dueling else None

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        h = self.trunk(obs)
        adv = self.advantage(h)
        if self.value is None:
            return adv
        return self.value(h) + adv - adv.mean(dim=1, keepdim=True)


class SpatialQ(nn.Module):
    """One value per action read off a CNN's map (``model.head: spatial``); dueling adds a
    state value from the whole map."""

    def __init__(self, advantage: SpatialHead, value: nn.Module | None):
        super().__init__()
        self.advantage, self.value = advantage, value

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        features = self.advantage.enc(obs)
        adv = self.advantage.read(features)
        if self.value is None:
            return adv
        return self.value(features) + adv - adv.mean(dim=1, keepdim=True)


def masked_q(q: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Q-values with illegal actions at -inf."""
    return q if mask is None else q.masked_fill(~mask, float("-inf"))


def feed_forward_q(model: ModelSettings, inp: Any, obs_dim: int, n_actions: int, dueling: bool,
                   where: str) -> nn.Module:
    """``model``'s Q-network without a recurrent cell: its encoder, if any, then the MLP (on
    the ``obs_dim`` flat values without one)."""
    head = head_settings(model)
    q: nn.Module
    if model.head == "spatial":  # the spatial head builds the encoder itself
        spatial = network(model, [(inp, 1)], n_actions, 1.0, where, mirror=False)
        assert isinstance(spatial, SpatialHead)
        q = SpatialQ(spatial, mlp(spatial.enc.out_features, 1, head, 1.0) if dueling else None)
    else:
        enc = encoder(model, [(inp, 1)], where)
        features = obs_dim if enc is None else enc.out_features
        check_network_fits(mlp_params(features, n_actions * (1 + dueling), head),
                           f"{where}.hidden", head.hidden)
        q = QNet(features, n_actions, head, dueling, enc)
    return mirrored(q, model, [(inp, 1)], n_actions, where)


class QNets:
    """What one trained policy learns with: online and target Q-networks, optimiser, RNGs."""

    def __init__(self, spec: PolicySpec, s: DQNSettings, seed: int, device: str):
        self.spec = spec
        view = spec.action_view
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(rng_for(seed, "dqn", "init", spec.id).integers(2**63)))
            model, where = policy_model(s, spec), model_key(spec)
            inp = obs_input(spec, model, where)
            self.recurrent = model.recurrent != "none"
            self.seq_len = model.seq_len  # sequences a recurrent network learns on
            self.online: nn.Module = (
                recurrent_q_net(model, [(inp, 1)], view.mask_dim, s.dueling, where)
                if self.recurrent
                else feed_forward_q(model, inp, spec.obs_dim, view.mask_dim, s.dueling, where)
            ).to(device)
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.online.parameters(), lr=s.lr)
        self.act_rng = rng_for(seed, "dqn", "act", spec.id)
        self.sample_rng = rng_for(seed, "dqn", "sample", spec.id)
        self.updates = 0  # gradient steps taken


# -- acting -----------------------------------------------------------------------------------
class DQNActor(NetActor):
    """Epsilon-greedy over the legal actions; greedy when not exploring."""

    algo: DQN
    policy: QNets

    def __init__(self, algo: Any, policy: QNets):
        super().__init__(algo, policy)
        # a recurrent policy's states, for callers that keep none of their own
        self._recurrent_state: dict[str, np.ndarray] = {}

    def act(self, batch: ActBatch, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        p = self.policy
        legal = batch.mask
        if p.recurrent:  # every row, to carry each agent's state on
            q, extras = recurrent_q(p.online, batch, len(p.spec.agents), self._recurrent_state,
                                    self.algo.device)
            greedy = masked_argmax(q, legal)
            if not explore:
                return greedy, extras
            random, take = self._draws(legal, len(q))
            return np.where(take, random, greedy), extras
        if not explore:
            return masked_argmax(self._q(batch.obs), legal), {}
        # Epsilon-greedy: the rows drawn at random need no Q-values.
        random, take = self._draws(legal, batch.obs.shape[0])
        rows = np.flatnonzero(~take)
        if len(rows):
            random[rows] = masked_argmax(self._q(batch.obs[rows]),
                                         None if legal is None else legal[rows])
        return random, {}

    def _q(self, obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return self.policy.online(obs_tensor(obs, self.algo.device)).cpu().numpy()

    def _draws(self, legal: np.ndarray | None, n: int) -> tuple[np.ndarray, np.ndarray]:
        """A random legal action for each of ``n`` rows, and which rows take it."""
        p = self.policy
        random = masked_uniform(p.act_rng, legal, (n, p.spec.action_view.mask_dim))
        return random, p.act_rng.random(n) < self.algo.epsilon()


def masked_argmax(q: np.ndarray, legal: np.ndarray | None) -> np.ndarray:
    """The best legal action of each row of ``q``."""
    return (q if legal is None else np.where(legal, q, -np.inf)).argmax(axis=1)


# -- the algorithm: collect, decide, learn ------------------------------------------------
@register
class DQN(OffPolicy):
    name = "dqn"
    Settings = DQNSettings
    settings: DQNSettings
    action_kinds = frozenset({"discrete"})
    turn_based = True
    learns_from_members = True
    supports_recurrent = True
    gauges = frozenset({"epsilon", "buffer_size"})
    metric_docs = {
        "epsilon": "the chance of a random (legal) action while training, at the last update",
        "loss/<policy>": "the Huber loss of the online Q-values against their n-step targets",
        "q_mean/<policy>": "the mean Q-value of the actions taken in the sampled batch",
        "target_mean/<policy>": "the mean n-step target those Q-values were moved towards",
        "buffer_size/<policy>": "transitions held in the policy's replay buffer",
    }

    def __init__(self, settings: DQNSettings, specs: dict[str, PolicySpec], device: str,
                 seed: int):
        super().__init__(settings, specs, device, seed)
        trained = [spec for spec in specs.values() if spec.trainable]
        self.policies = {spec.id: QNets(spec, settings, seed, device) for spec in trained}
        self._actors = {pid: DQNActor(self, p) for pid, p in self.policies.items()}

    def actor(self, pid: str) -> DQNActor:
        return self._actors[pid]

    def epsilon(self) -> float:
        s = self.settings
        steps = self.schedule.env_steps
        frac = min(1.0, steps / s.exploration_steps) if s.exploration_steps else 1.0
        return s.epsilon_start + frac * (s.epsilon_end - s.epsilon_start)

    def make_storage(self, num_envs: int) -> PolicyReplay:
        """A replay buffer per trained policy, refused up front if the machine cannot hold them."""
        s = self.settings
        return policy_replay({pid: p.spec for pid, p in self.policies.items()}, s.buffer_size,
                             s.save_buffer, priority_of(s),
                             state_sizes({pid: p.online for pid, p in self.policies.items()}))

    def update(self, storage: PolicyReplay) -> dict[str, float]:
        s = self.settings
        metrics: dict[str, float] = {"epsilon": self.epsilon()}
        steps = self.take_steps()
        for pid, p in self.policies.items():
            buffer = storage.buffers[pid]
            if len(buffer) < s.batch_size or pid in self.frozen:
                continue
            sums = np.zeros(3)
            for _ in range(steps):
                if p.recurrent:
                    figures = self._learn_sequences(pid, p, buffer)
                    sums += figures
                    continue
                batch = buffer.sample(s.batch_size, p.sample_rng, s.n_step, s.gamma,
                                      s.beta(self.schedule.env_steps))
                figures, errors = self._learn(pid, p, batch)
                buffer.update_priorities(batch.index, errors)
                sums += figures
            loss, q_mean, target_mean = sums / steps
            metrics.update({f"loss/{pid}": loss, f"q_mean/{pid}": q_mean,
                            f"target_mean/{pid}": target_mean,
                            f"buffer_size/{pid}": float(len(buffer))})
        return metrics

    def _learn(self, pid: str, p: QNets, b: Sample) -> tuple[np.ndarray, np.ndarray]:
        """One gradient step on ``b``: the loss, Q and target means, and each row's TD error."""
        s = self.settings
        obs = obs_tensor(b.obs, self.device)
        action = self.tensor(b.action).long()
        target = td_target(p.online, p.target, b, s.double, self.device)
        q = p.online(obs).gather(1, action[:, None]).squeeze(1)
        loss = weighted_huber(q, target, s.huber_delta, b.weight)
        self._step(pid, p, loss)
        errors = (target - q).detach().cpu().numpy()
        return np.array([loss.item(), q.mean().item(), target.mean().item()]), errors

    def _learn_sequences(self, pid: str, p: QNets, buffer: ReplayBuffer) -> np.ndarray:
        """One gradient step on sequences drawn from ``buffer``: the loss, Q and target means
        over the cells past the burn-in."""
        s = self.settings
        start, weight = buffer.draw(s.batch_size, p.sample_rng, s.beta(self.schedule.env_steps))
        w = windows(buffer, start, s.burn_in, p.seq_len)
        q, target, learn = self._sequence_q(p, buffer, w)
        loss = weighted_huber(q[learn], target[learn], s.huber_delta,
                              sequence_weights(weight, w.learn))
        self._step(pid, p, loss)
        buffer.update_priorities(start, sequence_errors(target - q, learn))
        return np.array([loss.item(), q[learn].mean().item(), target[learn].mean().item()])

    def _sequence_q(self, p: QNets, buffer: ReplayBuffer, w: Windows
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The online Q-values of the actions taken in windows ``w`` ``[L, B]``, their n-step
        targets, and which cells carry a loss."""
        s, dev = self.settings, self.device
        assert buffer.hidden is not None
        obs = obs_tensor(buffer.obs[w.pos], dev)
        next_obs = obs_tensor(buffer.next_obs[w.pos], dev)
        valid, learn = self.tensor(w.valid), self.tensor(w.learn)
        start = self.tensor(buffer.hidden[w.pos[0]])
        q_all, after = unroll(p.online, obs, start, valid)
        q = q_all.gather(2, self.tensor(buffer.action[w.pos]).long().unsqueeze(2)).squeeze(2)
        with torch.no_grad():
            _, target_after = unroll(p.target, obs, start, valid)
            q_target = after_each(p.target, next_obs, target_after)
            chooser = after_each(p.online, next_obs, after.detach()) if s.double else q_target
            bootstrap = ~self.tensor(buffer.terminated[w.pos])
            if buffer.next_mask is not None:
                legal = self.tensor(buffer.next_mask[w.pos])
                chooser = masked_q(chooser, legal)
                bootstrap &= legal.any(dim=2)
            value = q_target.gather(2, chooser.argmax(dim=2, keepdim=True)).squeeze(2)
            value = torch.where(bootstrap, value, torch.zeros_like(value))
            reward = self.tensor(buffer.reward[w.pos].astype(np.float32))
            target = n_step_targets(reward, valid, value, s.gamma, s.n_step)
        return q, target, learn

    def _step(self, pid: str, p: QNets, loss: torch.Tensor) -> None:
        """A gradient step on ``loss``, and the target network's update when it is due."""
        s = self.settings
        self.check_finite(loss, "DQN loss", f"policy {pid!r}", p.updates, "algo.lr")
        p.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(p.online.parameters(), s.max_grad_norm)
        p.optimizer.step()
        p.updates += 1
        if p.updates % s.target_every == 0:
            follow(p.target, p.online, s.tau)

    # -- state ----------------------------------------------------------------------------
    def greedy_net(self, pid: str) -> nn.Module:
        p = self.policies[pid]
        if p.recurrent:
            return greedy_recurrent_q(p.online, p.spec.action_view.mask_dim)
        return GreedyQ(p.online, discrete=True)

    def warm_parts(self, pid: str) -> WarmParts:
        p = self.policies[pid]  # the target starts as the online net, as in a fresh run
        return WarmParts({"online": p.online, "target": p.target}, {})

    def state_dict(self) -> dict[str, Any]:
        return copy.deepcopy({
            "schedule": self.schedule.state_dict(),
            "policies": {pid: {
                "online": p.online.state_dict(), "target": p.target.state_dict(),
                "optimizer": p.optimizer.state_dict(), "updates": p.updates,
                "act_rng": p.act_rng.bit_generator.state,
                "sample_rng": p.sample_rng.bit_generator.state,
            } for pid, p in self.policies.items()},
        })

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = copy.deepcopy(state)
        self.schedule.load_state_dict(state["schedule"])
        for pid, p in self.policies.items():
            saved = state["policies"][pid]
            p.online.load_state_dict(saved["online"])
            p.target.load_state_dict(saved["target"])
            p.optimizer.load_state_dict(saved["optimizer"])
            p.updates = saved["updates"]
            p.act_rng.bit_generator.state = saved["act_rng"]
            p.sample_rng.bit_generator.state = saved["sample_rng"]


def td_target(online: nn.Module, target: nn.Module, b: Sample, double: bool,
              device: str) -> torch.Tensor:
    """R + gamma^n * Q_target(s', a*) with a* the best legal action at s' (by the online net
    when ``double``); no bootstrap where the episode terminated or s' has no legal action."""
    with torch.no_grad():
        next_obs = obs_tensor(b.next_obs, device)
        next_mask = None if b.next_mask is None else tensor(b.next_mask, device)
        q_target = target(next_obs)
        chooser = online(next_obs) if double else q_target
        best = masked_q(chooser, next_mask).argmax(dim=1, keepdim=True)
        next_value = q_target.gather(1, best).squeeze(1)
        bootstrap = ~tensor(b.terminated, device)
        if next_mask is not None:
            bootstrap &= next_mask.any(dim=1)
        discount = tensor(b.discount.astype(np.float32), device)
        reward = tensor(b.reward.astype(np.float32), device)
        return reward + torch.where(bootstrap, discount * next_value, torch.zeros_like(reward))

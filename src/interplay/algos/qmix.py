"""``algo.name: vdn`` and ``qmix``: value decomposition for one cooperative team.

Every trained agent has a Q-network (one per policy, shared by its agents, or one each with
``share_params: false``), acting epsilon-greedily over its legal actions. Learning is on joint
rows (one per env copy and step, :class:`~interplay.data.replay.JointReplay`): the team's
value is the sum of the agents' chosen Q-values (VDN), or their monotonic mix by a network
whose weights a hypernetwork makes from the global state (QMIX: the env's ``state()`` where it
has one, the joined observations of every trained agent otherwise; ``algo.state``). The target is the team reward
(the sum of the agents' rewards) plus the discounted target value of the next step, with
double Q (the online networks pick each agent's next action, the target networks value it).
An agent absent from a row (it died, or had not joined) has its Q-value masked out of the mix,
its observation and action ignored; the episode ends for the team when any present agent's is
terminated.

One team only: every agent of the env must be trained here (no fixed or separately trained
agents, which would make the reward not the team's), every action discrete, and every agent
acting in every step (not turn-based).

With ``model.recurrent: gru | lstm`` each agent's Q-network carries its state through the
episode, and learning draws sequences of ``model.seq_len`` joint rows of one env copy after a
``burn_in`` (see :mod:`interplay.algos.team_sequences`).
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from gymnasium import spaces
from pydantic import Field, field_validator, model_validator
from torch import nn

from interplay.algos.attention_mixer import AttentionMixer
from interplay.algos.base import WarmParts, read_state, register
from interplay.algos.mixing import AgentQNets, Mixer, QActor, q_net
from interplay.algos.offpolicy import OffPolicy, ReplaySettings, default, follow_all, priority_of
from interplay.algos.recurrent_q import (
    SequenceSettings,
    greedy_recurrent_q,
    recurrent_q_net,
    sequence_errors,
    sequence_weights,
    state_sizes,
)
from interplay.algos.team_sequences import team_sequences
from interplay.config.algo import PrioritySettings
from interplay.config.critic_model import ATTENTION, CriticModelSettings, attention_reads_agents
from interplay.config.limits import MAX_COEF, MAX_COUNT, MAX_LR, MAX_SIZE, MAX_STEPS
from interplay.config.model import ModelSettings
from interplay.data.replay import JointReplay, JointReplayBuffer, joint_replay
from interplay.data.sequences import windows
from interplay.envs.batch import state_dim
from interplay.errors import ConfigError
from interplay.nets.agents import agent_nets, stacked_optimizer_state
from interplay.nets.attention import TokenLayout, attention_params
from interplay.nets.build import check_network_fits, model_key, obs_input, policy_model
from interplay.nets.greedy import GreedyQ
from interplay.nets.inputs import obs_tensor
from interplay.run.mapping import PolicySpec
from interplay.seeding import rng_for


class VDNSettings(ReplaySettings, PrioritySettings, SequenceSettings):
    mutable: ClassVar[dict[str, tuple[float, float]]] = {
        "lr": (1e-5, 1e-2), "batch_size": (16, 1024), "gamma": (0.9, 0.999),
        "epsilon_end": (0.0, 0.2), "target_every": (50, 5000)}
    batch_size: int = default("batch_size", 128)
    buffer_size: int = default("buffer_size", 50_000)
    learning_starts: int = default("learning_starts", 2_000)
    train_every: int = default("train_every", 8)
    tau: float = default("tau", 1.0, "Each target update moves the target networks this far "
                         "towards the online ones (1 = copy; with a small ``tau``, update every "
                         "gradient step: ``target_every: 1``).")
    lr: float = Field(5e-4, gt=0, le=MAX_LR)
    """Adam's learning rate (agents' networks and mixer together)."""
    n_step: int = Field(1, ge=1, le=MAX_COUNT)
    """Team rewards of this many steps of one env copy folded into each target before
    bootstrapping (fewer where the episode ends)."""
    target_every: int = Field(200, ge=1, le=MAX_STEPS)
    """Gradient steps between copies of the online networks into the target networks."""
    team_reward: Literal["sum", "mean"] = "sum"
    """The team's reward in a step: the sum of its present agents' rewards, or their mean
    (for envs that pay every agent about the same shared reward)."""
    double: bool = True
    """Double Q: the online networks choose the next actions the targets value."""
    epsilon_start: float = Field(1.0, ge=0, le=1)
    """Exploration at the start."""
    epsilon_end: float = Field(0.05, ge=0, le=1)
    """Exploration after ``exploration_steps``."""
    exploration_steps: int = Field(50_000, ge=0, le=MAX_STEPS)
    """Env steps over which epsilon falls linearly."""
    max_grad_norm: float = Field(10.0, gt=0, le=MAX_COEF)
    """Gradient-norm clip."""
    share_params: bool = True
    """One Q-network per policy; false gives each agent its own."""
    model: ModelSettings = Field(default_factory=lambda: ModelSettings(
        hidden=[64, 64], activation="relu"))
    """The agents' Q-networks."""


class QMIXSettings(VDNSettings):
    uses_env_state: ClassVar[bool] = True  # the env is built to keep its global state
    state: Literal["auto", "env", "observations"] = "auto"
    """What the mixer's hypernetworks read as the global state: ``env`` the env's own
    ``state()`` (a PettingZoo env with a Box ``state_space``; refused before any step for an
    env without one, such as the built-in batched envs), ``observations`` every trained
    agent's observation joined, ``auto`` the env's state where it has a flat one, else the
    observations."""
    mixer_hidden: int = Field(32, ge=1, le=MAX_SIZE)
    """Width of the mixing network's hidden layer."""
    hypernet_hidden: int = Field(64, ge=1, le=MAX_SIZE)
    """Width of the hypernetworks that make the mixer's weights from the state."""
    critic_model: CriticModelSettings = Field(default_factory=CriticModelSettings)
    """The mixer: ``type: auto`` makes its weights from the state by hypernetworks
    (``mixer_hidden``, ``hypernet_hidden``; no other key is used); ``type: attention`` makes
    them by attention across the agents' observations, one token per agent, absent agents
    masked out (``embed``, ``heads``, ``layers``, ``activation``; ``hidden`` is the head
    that gives each agent its ``mixer_hidden`` non-negative weights)."""

    @field_validator("critic_model")
    @classmethod
    def _a_mixer(cls, value: CriticModelSettings) -> CriticModelSettings:
        if value.type not in ("auto", ATTENTION):
            raise ValueError(f"type: {value.type} is no mixer; QMIX mixes by hypernetworks "
                             "(auto) or by attention across agents (attention)")
        return value

    @model_validator(mode="after")
    def _attention_reads_agents(self) -> QMIXSettings:
        attention_reads_agents(self.critic_model, self.state)
        return self


@register
class VDN(OffPolicy):
    """Value decomposition: the team's value is the sum of its agents' values."""

    name = "vdn"
    family = "vdn"
    Settings = VDNSettings
    settings: VDNSettings
    action_kinds = frozenset({"discrete"})
    turn_based = False
    centralised = True  # the team's value mixes every agent's
    supports_recurrent = True
    gauges = frozenset({"epsilon", "buffer_size"})
    metric_docs: ClassVar[dict[str, str]] = {
        "loss": "squared TD error of the team's value (importance-weighted with prioritised replay)",
        "q_tot_mean": "the team's value of the sampled rows, mean",
        "target_mean": "the TD target, mean",
        "epsilon": "exploration now",
        "buffer_size": "joint rows in the replay buffer",
    }

    # The env's global state space the mixer reads (QMIX, when the env keeps one); None: the
    # joined observations.
    env_state: spaces.Box | None = None

    def __init__(self, settings: VDNSettings, specs: dict[str, PolicySpec], device: str,
                 seed: int):
        super().__init__(settings, specs, device, seed)
        left = [p for p, s in specs.items() if not s.trainable]
        if left:
            raise ConfigError(
                f"algo.name: {self.name} learns one team's reward, so every agent must be "
                f"trained by it; policies {left} are {specs[left[0]].config.type} (use ippo or "
                "mappo for competitive or mixed setups)")
        self.trained = list(specs)
        s = settings
        self.policies: dict[str, AgentQNets] = {}
        self.seq_len = 1  # the longest sequence a recurrent policy learns on
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(rng_for(seed, self.name, "init").integers(2**63)))
            for pid, spec in specs.items():
                model = policy_model(s, spec)
                where = model_key(spec)
                inp = obs_input(spec, model, where)
                n_actions = spec.action_view.mask_dim or int(spec.action_space.n)
                net: nn.Module
                if model.recurrent != "none":
                    if not s.share_params and len(spec.agents) > 1:
                        raise ConfigError(
                            f"algo.share_params: false with {where}.recurrent: "
                            f"{model.recurrent} (policy {pid!r}): recurrent Q-networks are "
                            "shared by a policy's agents")
                    net = recurrent_q_net(model, [(inp, 1)], n_actions, False, where)
                    self.seq_len = max(self.seq_len, model.seq_len)
                else:
                    net = agent_nets(q_net(model, inp, n_actions, where), len(spec.agents),
                                     s.share_params)
                self.policies[pid] = AgentQNets(spec, net.to(device), seed, self.name)
            self.n_agents = sum(p.k for p in self.policies.values())
            self.state_dim = (state_dim(self.env_state) if self.env_state is not None else
                              sum(p.k * p.spec.obs_dim for p in self.policies.values()))
            self.mixer = self._mixer()
            self.target_mixer = copy.deepcopy(self.mixer) if self.mixer is not None else None
        params = [q for p in self.policies.values() for q in p.online.parameters()]
        if self.mixer is not None:
            params += list(self.mixer.parameters())
        self.optimizer = torch.optim.Adam(params, lr=s.lr)
        self.sample_rng = rng_for(seed, self.name, "sample")
        self._actors = {pid: QActor(self, p) for pid, p in self.policies.items()}

    def _mixer(self) -> Mixer | None:
        return None

    def epsilon(self) -> float:
        s = self.settings
        frac = min(1.0, self.schedule.env_steps / max(1, s.exploration_steps))
        return s.epsilon_start + frac * (s.epsilon_end - s.epsilon_start)

    def actor(self, pid: str) -> QActor:
        return self._actors[pid]

    def make_storage(self, num_envs: int) -> JointReplay:
        s = self.settings
        return joint_replay({pid: p.spec for pid, p in self.policies.items()}, s.buffer_size,
                            f"algo.name: {self.name}",
                            self.state_dim if self.env_state is not None else 0, s.save_buffer,
                            priority_of(s), absent_ok=self.agents_come_and_go,
                            state_sizes=state_sizes(
                                {pid: p.online for pid, p in self.policies.items()}))

    # -- learning -------------------------------------------------------------------------
    def update(self, storage: JointReplay) -> dict[str, float]:
        s = self.settings
        steps = self.take_steps()
        sums = np.zeros(3)
        recurrent = any(p.recurrent for p in self.policies.values())
        for _ in range(steps):
            buffer = storage.buffer
            if recurrent:
                sums += self._learn_sequences(buffer)
                continue
            index, rows, weight = buffer.sample(s.batch_size, self.sample_rng,
                                                s.beta(self.schedule.env_steps))
            end, ret, discount = self._fold(buffer, index)
            last = rows if s.n_step == 1 else buffer.gather(end)
            states = None if self.env_state is None else (
                buffer.state_rows(index), buffer.state_rows(end, "next_state"))
            figures, errors = self._learn(rows, last, ret, discount, weight, states)
            buffer.update_priorities(index, errors)
            sums += figures
        loss, q_tot, target = sums / steps
        return {"loss": loss, "q_tot_mean": q_tot, "target_mean": target,
                "epsilon": self.epsilon(), "buffer_size": float(len(storage))}

    def _team_reward(self, buffer: JointReplayBuffer, pos: np.ndarray) -> np.ndarray:
        """The team's reward in the rows at ``pos``: its present agents' sum or mean."""
        total = np.zeros(len(pos))
        count = np.zeros(len(pos))
        for pid in self.policies:
            cols = buffer.columns[pid]
            present = cols["present"][pos]
            total += (cols["reward"][pos] * present).sum(axis=1)
            count += present.sum(axis=1)
        return total / np.maximum(count, 1) if self.settings.team_reward == "mean" else total

    def _fold(self, buffer: JointReplayBuffer, index: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For rows ``index``: the row each n-step target bootstraps from, the discounted team
        rewards up to it, and the discount of that bootstrap."""
        gamma = self.settings.gamma
        ret = self._team_reward(buffer, index)
        discount = np.full(len(index), gamma)
        end = np.asarray(index)
        for _ in range(self.settings.n_step - 1):
            nxt, ok = buffer.follow(end)
            if not ok.any():
                break
            ret = ret + np.where(ok, discount * self._team_reward(buffer, nxt), 0.0)
            end = nxt
            discount = np.where(ok, discount * gamma, discount)
        return end, ret, discount

    def _learn(self, rows: dict[str, Any], last: dict[str, Any], ret: np.ndarray,
               discount: np.ndarray, weight: np.ndarray | None,
               states: tuple[np.ndarray, np.ndarray] | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """One gradient step on joint ``rows``, their targets bootstrapped from the rows
        ``last`` (the same rows for 1-step targets) with the folded team rewards ``ret`` and
        ``discount`` (importance ``weight``-ed with prioritised replay): the loss, Q and target
        means, and each row's TD error. ``states``: the env's global state at the rows and
        after ``last`` (else the mixer reads the joined observations)."""
        s = self.settings
        dev = self.device
        q_parts, next_parts, present, next_present = [], [], [], []
        obs_parts, next_obs_parts = [], []
        for pid, p in self.policies.items():
            r, e = rows[pid], last[pid]
            b, k = r.present.shape
            obs = obs_tensor(r.obs.reshape(b, k, -1), dev)
            nxt = obs_tensor(e.next_obs.reshape(b, k, -1), dev)
            q_all = p.online.over_agents(obs)
            act = torch.as_tensor(r.action, device=dev).long().view(b, k, 1)
            q_parts.append(q_all.gather(2, act).squeeze(2))
            with torch.no_grad():
                target_all = p.target.over_agents(nxt)
                chooser = p.online.over_agents(nxt) if s.double else target_all
                if e.next_mask is not None:
                    legal = torch.as_tensor(e.next_mask, device=dev)
                    chooser = chooser.masked_fill(~legal, -torch.inf)
                best = chooser.argmax(dim=2, keepdim=True)
                next_parts.append(target_all.gather(2, best).squeeze(2))
            present.append(torch.as_tensor(r.present, device=dev))
            # after the last folded row: an agent whose episode was cut short (truncated) is
            # still valued at its last observation; one that ended (terminated) is out of the mix
            next_present.append(torch.as_tensor(e.present & ~e.terminated, device=dev))
            obs_parts.append(obs.view(b, -1).float())
            next_obs_parts.append(nxt.view(b, -1).float())
        here_all = torch.cat(present, dim=1).float()
        next_all = torch.cat(next_present, dim=1).float()
        q = torch.cat(q_parts, dim=1) * here_all
        q_next = torch.cat(next_parts, dim=1) * next_all
        if states is None:
            state = torch.cat(obs_parts, dim=1)
            next_state = torch.cat(next_obs_parts, dim=1)
        else:
            state, next_state = (torch.as_tensor(x, device=dev) for x in states)
        q_tot = self._mix(q, state, self.mixer, here_all)
        with torch.no_grad():
            next_tot = self._mix(q_next, next_state, self.target_mixer, next_all)
            goes_on = (next_all.sum(dim=1) > 0).float()  # some agent of the team goes on
            target = (torch.as_tensor(ret, device=dev, dtype=torch.float32)
                      + torch.as_tensor(discount, device=dev, dtype=torch.float32)
                      * goes_on * next_tot)
        td = q_tot - target
        loss = (td ** 2).mean() if weight is None else (
            torch.as_tensor(weight, dtype=td.dtype, device=dev) * td ** 2).mean()
        self._step(loss)
        errors = (target - q_tot).detach().cpu().numpy()
        return np.array([loss.item(), q_tot.mean().item(), target.mean().item()]), errors

    def _learn_sequences(self, buffer: JointReplayBuffer) -> np.ndarray:
        """One gradient step on sequences of joint rows (recurrent Q-networks): the loss, Q
        and target means over the cells past the burn-in."""
        s = self.settings
        start, weight = buffer.draw(s.batch_size, self.sample_rng,
                                    s.beta(self.schedule.env_steps))
        w = windows(buffer, start, s.burn_in, self.seq_len)
        q_tot, target = team_sequences(self, buffer, w)
        learn = torch.as_tensor(w.learn, device=self.device)
        td = (q_tot - target)[learn]
        cell_weight = sequence_weights(weight, w.learn)
        loss = (td ** 2).mean() if cell_weight is None else (torch.as_tensor(
            cell_weight, dtype=td.dtype, device=self.device) * td ** 2).mean()
        self._step(loss)
        buffer.update_priorities(start, sequence_errors(q_tot - target, learn))
        return np.array([loss.item(), q_tot[learn].mean().item(), target[learn].mean().item()])

    def _step(self, loss: torch.Tensor) -> None:
        """A gradient step on ``loss``, and the target networks' update when it is due."""
        s = self.settings
        self.check_finite(loss, f"{self.name} TD loss", f"policies {list(self.policies)}",
                          self.updates, "algo.lr")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(
            [q for g in self.optimizer.param_groups for q in g["params"]], s.max_grad_norm)
        self.optimizer.step()
        self.updates += 1
        if self.updates % s.target_every == 0:
            pairs = [(p.target, p.online) for p in self.policies.values()]
            if self.mixer is not None and self.target_mixer is not None:
                pairs.append((self.target_mixer, self.mixer))
            follow_all(pairs, s.tau)

    def _mix(self, q: torch.Tensor, state: torch.Tensor, mixer: nn.Module | None,
             live: torch.Tensor) -> torch.Tensor:
        """The team's value ``[b]`` of the agents' ``q`` ``[b, agents]`` (absent agents' zero;
        ``live`` flags the present ones)."""
        return q.sum(dim=1)

    # -- state ----------------------------------------------------------------------------
    def greedy_net(self, pid: str) -> nn.Module:
        p = self.policies[pid]
        if p.recurrent:
            return greedy_recurrent_q(p.online, p.spec.action_view.mask_dim)
        # one agent's network (the first's, when each has its own), as load_policy acts
        return GreedyQ(p.online.agent(0), discrete=True)

    def warm_parts(self, pid: str) -> WarmParts:
        p = self.policies[pid]
        rest = ({"mixer": self.mixer, "target_mixer": self.target_mixer}
                if self.mixer is not None and self.target_mixer is not None else {})
        return WarmParts({"online": p.online, "target": p.target}, rest)

    def state_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "policies": {pid: {"online": p.online.state_dict(), "target": p.target.state_dict(),
                               "act_rng": p.act_rng.bit_generator.state}
                         for pid, p in self.policies.items()},
            "optimizer": self.optimizer.state_dict(), **self.schedule_state(),
        }
        if self.mixer is not None and self.target_mixer is not None:
            out["mixer"] = self.mixer.state_dict()
            out["target_mixer"] = self.target_mixer.state_dict()
        return copy.deepcopy(out)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = copy.deepcopy(state)
        for pid, p in self.policies.items():
            saved = state["policies"][pid]
            p.online.load_state_dict(saved["online"])
            p.target.load_state_dict(saved["target"])
            p.act_rng.bit_generator.state = saved["act_rng"]
        nets = [p.online for p in self.policies.values()]
        self.optimizer.load_state_dict(stacked_optimizer_state(
            state["optimizer"], nets + ([self.mixer] if self.mixer is not None else [])))
        self.load_schedule_state(state)
        if self.mixer is not None and self.target_mixer is not None:
            self.mixer.load_state_dict(state["mixer"])
            self.target_mixer.load_state_dict(state["target_mixer"])


@register
class QMIX(VDN):
    """QMIX: the agents' values mixed monotonically, with weights made from the state."""

    name = "qmix"
    Settings = QMIXSettings
    settings: QMIXSettings
    attention_critic = True

    def __init__(self, settings: QMIXSettings, specs: dict[str, PolicySpec], device: str,
                 seed: int, state_space: spaces.Box | None = None):
        """``state_space``: the global state the env keeps (None if it keeps none); the mixer
        reads it unless ``algo.state`` is ``observations`` (an attention mixer always reads
        the agents' observations)."""
        self.attention = settings.critic_model.attention
        self.env_state = (None if self.attention else
                          read_state(settings.state, state_space, "the mixer"))
        super().__init__(settings, specs, device, seed)

    def _mixer(self) -> Mixer | AttentionMixer:
        s = self.settings
        if self.attention:
            return self._attention_mixer()
        hyper, hidden = s.hypernet_hidden, s.mixer_hidden
        params = (3 * self.state_dim * hyper + hyper * (self.n_agents * hidden + hidden + 1)
                  + self.state_dim * hidden)
        check_network_fits(params, "algo.mixer_hidden",
                           f"{hidden}, algo.hypernet_hidden: {hyper}",
                           "lower algo.mixer_hidden or algo.hypernet_hidden")
        return Mixer(self.n_agents, self.state_dim, s.mixer_hidden, s.hypernet_hidden).to(
            self.device)

    def _attention_mixer(self) -> AttentionMixer:
        s, model = self.settings, self.settings.critic_model
        groups = []
        for p in self.policies.values():
            inp = obs_input(p.spec, policy_model(s, p.spec), model_key(p.spec))
            if inp.layout is not None:
                raise ConfigError(f"algo.critic_model.type: attention reads each agent's "
                                  f"observation as a flat vector, but policy {p.spec.id!r}'s "
                                  "are images; use critic_model.type: auto")
            groups.append((p.k, p.spec.obs_dim, 0))
        layout = TokenLayout(tuple(groups))
        e = model.embed
        check_network_fits(attention_params(layout, model, s.mixer_hidden) + 2 * e * e
                           + 2 * e * s.mixer_hidden, "algo.critic_model.embed", e,
                           "lower algo.critic_model.embed or algo.critic_model.layers")
        return AttentionMixer(layout, model, s.mixer_hidden).to(self.device)

    def _mix(self, q: torch.Tensor, state: torch.Tensor, mixer: nn.Module | None,
             live: torch.Tensor) -> torch.Tensor:
        assert mixer is not None
        return mixer(q, state, live) if self.attention else mixer(q, state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("mixer", {}).get("b1.weight")
        if saved is not None and saved.shape[1] != self.state_dim:
            what = ("the env's state()" if self.env_state is not None
                    else "the agents' observations joined")
            raise ConfigError(
                f"algo.state: the saved QMIX mixer reads a state of {saved.shape[1]} numbers, "
                f"this run's reads {self.state_dim} ({what}, algo.state: "
                f"{self.settings.state}); keep algo.state and the env of the saved run (a run "
                "saved before QMIX mixed on the env's state resumes with algo.state: "
                "observations)")
        super().load_state_dict(state)

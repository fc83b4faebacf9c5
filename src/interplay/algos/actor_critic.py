"""What the actor-critic learners from replay share (MADDPG/MATD3 and ISAC/MASAC): a policy's
actor and critics with their targets, acting with them, sampled rows as typed tensors, the
centralised critics' input, and keeping all of it in checkpoints.

A centralised critic row for one of policy ``pid``'s agents holds the agent's own observation,
action and slot (one-hot, with several agents), then every trained agent's observation (or the
env's global state in their place, with ``algo.state``) and every trained agent's action. Each
agent's action keeps its place in the joint part in every row: a critic shared by the policy's
agents then learns one effect of each agent's action, whichever row it values. An attention
critic (``critic_model.type: attention``) reads the same row, then one live flag per trained
agent, as one token per agent (its observation and action) and values the row's own agent's
token (:mod:`interplay.nets.attention`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch
from gymnasium import spaces
from pydantic import Field, field_validator, model_validator
from torch import nn

from interplay.algos.base import NetActor, read_state
from interplay.algos.offpolicy import OffPolicy, priority_of, tensor
from interplay.config.algo import AlgoSettings
from interplay.config.critic_model import CriticModelSettings, attention_reads_agents
from interplay.config.model import ModelSettings, same_view_as_actors
from interplay.data.replay import STATE_KEYS, JointReplay, JointReplayBuffer, joint_replay
from interplay.envs.batch import state_dim
from interplay.nets.attention import TokenLayout, attention_critic
from interplay.nets.build import ObsInput, Part, model_key, network, obs_input, policy_model
from interplay.nets.inputs import obs_tensor
from interplay.run.actors import ActBatch
from interplay.run.mapping import PolicySpec
from interplay.seeding import rng_for


def _relu(hidden: list[int], settings: type[ModelSettings] = ModelSettings) -> Any:
    return lambda: settings(hidden=hidden, activation="relu")


CriticMaker = Callable[[int, float], nn.Module]
"""Makes one critic network: ``(out_dim, out_gain) -> module``."""


def critic_maker(model: ModelSettings, parts: list[Part]) -> CriticMaker:
    """A maker of critics built from ``model`` over rows of ``parts``."""
    return lambda out_dim, gain: network(model, parts, out_dim, gain, "algo.critic_model")


class ActorCriticModels(AlgoSettings):
    """The networks of an actor-critic learner."""

    model: ModelSettings = Field(default_factory=_relu([64, 64]))
    """The actors, and how observations are prepared (``policies.<pid>.model`` overrides any
    of these for one policy)."""
    critic_model: CriticModelSettings = Field(default_factory=_relu([64, 64], CriticModelSettings))
    """The critics (they see observations as the actors do: resize, grayscale and layout are
    taken from ``model``); ``type: attention`` with centralised critics attends across the
    trained agents, one token per agent (its observation and action)."""

    @field_validator("critic_model")
    @classmethod
    def _critics_see_what_actors_see(cls, value: CriticModelSettings) -> CriticModelSettings:
        return same_view_as_actors(value)

    @model_validator(mode="after")
    def _attention_reads_agents(self) -> ActorCriticModels:
        attention_reads_agents(self.critic_model, getattr(self, "state", "observations"))
        return self


def act_dim(spec: PolicySpec) -> int:
    """Width of one agent's action as the critics see it (one-hot for discrete)."""
    view = spec.action_view
    return view.mask_dim if view.kind == "discrete" else int(np.prod(view.shape))


def gumbel_noise(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Standard Gumbel draws: argmax(logits + these) samples softmax(logits)."""
    u = rng.random(shape).clip(1e-20, 1.0 - 1e-7)
    return -np.log(-np.log(u)).astype(np.float32)


# -- sampled rows as tensors ----------------------------------------------------------------------
class Columns(NamedTuple):
    """One policy's sampled rows as tensors: ``[b, ...]`` (an agent's transitions) or
    ``[b, agents, ...]`` (joint rows); actions as the critics see them (one-hot for discrete)."""

    obs: torch.Tensor
    next_obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor  # float32
    terminated: torch.Tensor  # bool: the agent's episode ended for good
    bootstrap: torch.Tensor  # bool: not terminated, and some action is legal at next_obs
    mask: torch.Tensor | None
    next_mask: torch.Tensor | None


def columns(rows: Any, width: int, discrete: bool, device: str) -> Columns:
    """Sampled rows (a ``Sample`` or a ``GroupRows``) as :class:`Columns`."""
    action = tensor(rows.action, device)
    lead = rows.reward.shape  # [b] or [b, agents]
    mask = None if rows.mask is None else tensor(rows.mask, device)
    next_mask = None if rows.next_mask is None else tensor(rows.next_mask, device)
    terminated = tensor(rows.terminated, device)
    bootstrap = ~terminated
    if next_mask is not None:
        bootstrap &= next_mask.any(dim=-1)  # no legal action left: nothing to bootstrap
    return Columns(
        obs=obs_tensor(rows.obs, device), next_obs=obs_tensor(rows.next_obs, device),
        action=(nn.functional.one_hot(action.long(), width).float() if discrete
                else action.reshape(*lead, width)),
        reward=tensor(rows.reward.astype(np.float32), device), terminated=terminated,
        bootstrap=bootstrap, mask=mask, next_mask=next_mask)


class States(NamedTuple):
    """The env's global state of sampled joint rows, as the critics read it."""

    now: torch.Tensor  # [b, state_dim] at the rows' observations
    next: torch.Tensor  # [b, state_dim] at their next observations


def sampled_states(buffer: JointReplayBuffer, index: np.ndarray, device: str,
                   env_state: Any) -> States | None:
    """The global state of the joint rows at ``index`` (None when the critics read the joined
    observations instead: ``env_state`` is None)."""
    if env_state is None:
        return None
    return States(*(tensor(buffer.state_rows(index, key), device) for key in STATE_KEYS))


# -- a policy's networks, and acting with them ----------------------------------------------------
class ActorCriticNets:
    """One trained policy's actor and critics: what its subclasses build, and what every one
    keeps (its spec, action width, and the RNG its agents act with)."""

    def __init__(self, spec: PolicySpec, seed: int, name: str):
        self.spec = spec
        self.k = len(spec.agents)
        self.discrete = spec.action_view.kind == "discrete"
        self.act_dim = act_dim(spec)
        self.act_rng = rng_for(seed, name, "act", spec.id)

    def nets(self) -> dict[str, nn.Module | torch.optim.Optimizer]:
        """Every network and optimiser by the name checkpoints keep it under."""
        raise NotImplementedError

    def extra_state(self) -> dict[str, Any]:
        """What else a checkpoint keeps of this policy."""
        return {}

    def load_extra_state(self, saved: dict[str, Any]) -> None:
        pass


class ActorCriticActor(NetActor):
    """Acting with a policy's actor: the most likely legal action (discrete, Gumbel-max draws
    when exploring), or a Box action in [-1, 1] that :meth:`box` makes of the actor's output."""

    squashed = True
    algo: ActorCritic

    def act(self, batch: ActBatch, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        p = self.policy
        with torch.no_grad():
            out = p.actor(obs_tensor(batch.obs, self.algo.device)).cpu().numpy()
        if p.discrete:
            legal = batch.mask if batch.mask is not None else np.ones(out.shape, bool)
            if explore:
                out = out + gumbel_noise(p.act_rng, out.shape)
            return np.where(legal, out, -np.inf).argmax(axis=1), {}
        action = self.box(out, batch, explore)
        return action.astype(np.float32).reshape(-1, *p.spec.action_view.shape), {}

    def box(self, out: np.ndarray, batch: ActBatch, explore: bool) -> np.ndarray:
        """Box actions in [-1, 1] from the actor's output ``out``."""
        raise NotImplementedError


# -- the learner ----------------------------------------------------------------------------------
class ActorCritic(OffPolicy):
    """An off-policy learner with an actor and critics per trained policy (built by
    :meth:`make_nets`), acting through :attr:`Actor`."""

    Actor: ClassVar[type[ActorCriticActor]] = ActorCriticActor
    policies: dict[str, Any]

    def __init__(self, settings: Any, specs: dict[str, PolicySpec], device: str, seed: int):
        super().__init__(settings, specs, device, seed)
        self.trained = [pid for pid, spec in specs.items() if spec.trainable]
        inputs = {pid: obs_input(specs[pid], policy_model(settings, specs[pid]),
                                 model_key(specs[pid])) for pid in self.trained}
        self.policies = {pid: self.make_nets(pid, inputs) for pid in self.trained}
        self._actors = {pid: self.Actor(self, p) for pid, p in self.policies.items()}
        self.sample_rng = rng_for(seed, self.name, "sample")

    def make_nets(self, pid: str, inputs: dict[str, ObsInput]) -> ActorCriticNets:
        """Policy ``pid``'s networks, given how each trained policy's observations enter one."""
        raise NotImplementedError

    def actor(self, pid: str) -> ActorCriticActor:
        return self._actors[pid]

    def check_loss(self, pid: str, what: str, loss: torch.Tensor) -> None:
        self.check_finite(loss, f"{self.name} {what}", f"policy {pid!r}", self.updates,
                          "algo.lr_critic / algo.lr_actor")

    def state_dict(self) -> dict[str, Any]:
        return copy.deepcopy({
            **self.schedule_state(),
            "policies": {pid: {
                **{name: x.state_dict() for name, x in p.nets().items()},
                "act_rng": p.act_rng.bit_generator.state, **p.extra_state(),
            } for pid, p in self.policies.items()},
        })

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = copy.deepcopy(state)
        self.load_schedule_state(state)
        for pid, p in self.policies.items():
            saved = state["policies"][pid]
            for name, x in p.nets().items():
                x.load_state_dict(saved[name])
            p.act_rng.bit_generator.state = saved["act_rng"]
            p.load_extra_state(saved)


class CentralCritics(ActorCritic):
    """An :class:`ActorCritic` whose critics see every trained agent: their input (see the
    module's doc), and the joint replay buffer they learn from, whose rows need every trained
    agent acting in every step."""

    turn_based = False
    agents_come_and_go = False
    centralised = True
    attention_critic = True

    def __init__(self, settings: Any, specs: dict[str, PolicySpec], device: str, seed: int,
                 state_space: spaces.Box | None = None):
        """``state_space``: the global state the env keeps (None if it keeps none); the critics
        read it in place of the joined observations unless ``algo.state`` is
        ``observations`` (an attention critic always reads the observations)."""
        self.attention = settings.critic_model.attention
        self.env_state = (None if self.attention else
                          read_state(settings.state, state_space, "the critic"))
        self.state_dim = state_dim(self.env_state)
        super().__init__(settings, specs, device, seed)

    def critic_maker(self, pid: str, inputs: dict[str, ObsInput]) -> CriticMaker:
        """A maker of policy ``pid``'s critics: over :meth:`critic_parts`, or attending across
        the agents' tokens of the same rows."""
        model = self.settings.critic_model
        if not self.attention:
            return critic_maker(model, self.critic_parts(pid, inputs))
        specs = self.specs
        k = len(specs[pid].agents)
        own = inputs[pid].dim + act_dim(specs[pid])
        layout = TokenLayout(
            tuple((len(specs[q].agents), inputs[q].dim, act_dim(specs[q])) for q in self.trained),
            lead=own + (k if k > 1 else 0), own_group=self.trained.index(pid),
            slot_at=own if k > 1 else None)
        groups = [inputs[q] for q in self.trained]
        return lambda out_dim, gain: attention_critic(layout, model, groups, out_dim, gain)

    def critic_parts(self, pid: str, inputs: dict[str, ObsInput]) -> list[Part]:
        """The pieces of a critic row of policy ``pid``, in :meth:`critic_input`'s order."""
        specs = self.specs
        k = len(specs[pid].agents)
        joint: list[Part] = ([(self.state_dim, 1)] if self.env_state is not None else
                             [(inputs[q], len(specs[q].agents)) for q in self.trained])
        joint_act = sum(len(specs[q].agents) * act_dim(specs[q]) for q in self.trained)
        return [(inputs[pid], 1), (act_dim(specs[pid]), 1), *([(k, 1)] if k > 1 else []),
                *joint, (joint_act, 1)]

    def critic_input(self, pid: str, obs: dict[str, torch.Tensor], act: dict[str, torch.Tensor],
                     own: torch.Tensor | None = None,
                     state: torch.Tensor | None = None) -> torch.Tensor:
        """Critic rows ``[b, agents, in]`` for policy ``pid``'s agents, the env's global
        ``state`` ``[b, state_dim]`` (with ``algo.state``) in place of the joined observations.
        ``own`` (``[b, agents, act_dim]``) replaces, in agent j's row, agent j's action in both
        places; the other agents' actions stay as in ``act``."""
        b, k = obs[pid].shape[:2]
        dev = obs[pid].device
        cols = [obs[pid], act[pid] if own is None else own]
        if k > 1:
            cols.append(torch.eye(k, device=dev).expand(b, k, k))
        joint = state if state is not None else torch.cat(
            [obs[q].reshape(b, -1) for q in self.trained], dim=1)
        cols.append(joint[:, None].expand(b, k, -1))
        for q in self.trained:
            if q == pid and own is not None:
                eye = torch.eye(k, device=dev)[None, :, :, None]  # [1, row, agent, 1]
                cols.append((eye * own[:, None] + (1 - eye) * act[q][:, None]).reshape(b, k, -1))
            else:
                cols.append(act[q].reshape(b, 1, -1).expand(b, k, -1))
        if self.attention:  # every trained agent acts in every joint row (see the class doc)
            agents = sum(len(self.specs[q].agents) for q in self.trained)
            cols.append(torch.ones(b, k, agents, device=dev))
        return torch.cat(cols, dim=2)

    def make_storage(self, num_envs: int) -> JointReplay:
        """One joint replay buffer of every trained agent (and of the env's global state, when
        the critics read it), refused up front if the machine cannot hold it."""
        s = self.settings
        return joint_replay({pid: p.spec for pid, p in self.policies.items()}, s.buffer_size,
                            f"algo.name: {self.name}", self.state_dim, s.save_buffer,
                            priority_of(s), absent_ok=self.agents_come_and_go)

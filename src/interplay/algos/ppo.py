"""``algo.name: ippo`` and ``mappo``: proximal policy optimisation for groups of agents.

One implementation; the two names are presets. Each trained policy has an actor and a critic
network, shared by all of its agents or one per agent. IPPO's critic sees what the agent sees;
MAPPO's also sees the joint observation of its env copy: the concatenation of what every agent
trained here saw in that step (for the MPE tasks that is exactly the env's global state).

Acting samples from the current policy with frozen observation statistics; each transition
keeps its log-probability. Every ``rollout`` steps, ``update`` evaluates the critic on the
stored observations and next observations, computes advantages per stream (see ``gae``),
then runs epochs × minibatches of clipped policy-gradient, value and entropy steps.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from gymnasium import spaces
from pydantic import Field

from interplay.algos.base import (
    Algorithm,
    AlgoSettings,
    WarmParts,
    read_state,
    register,
)
from interplay.config.limits import MAX_COEF, MAX_COUNT, MAX_LR, MAX_SIZE, MAX_STEPS
from interplay.config.model import ModelSettings
from interplay.data.memory import check_fits
from interplay.data.returns import gae
from interplay.data.rollout import Rollout, RolloutStorage
from interplay.envs.batch import state_dim
from interplay.envs.images import is_image
from interplay.errors import ConfigError
from interplay.nets.agents import agent_nets, stacked_optimizer_state
from interplay.nets.build import ObsInput, model_key, network, obs_input, policy_model
from interplay.nets.distributions import ActionDist
from interplay.nets.greedy import GreedyPolicy, Standardise
from interplay.nets.normalize import RunningMeanStd
from interplay.nets.recurrent import recurrent_net
from interplay.run.actors import ActBatch
from interplay.run.mapping import PolicySpec
from interplay.seeding import rng_for

OBS_CLIP = 10.0  # normalised observations are clipped to +-this
VALUE_CHUNK = 65_536  # rows of joined critic inputs valued at once


class Joined:
    """Critic inputs of rows: each row's own input, then a row of a shared ``joint`` table
    (the joint observation of its copy at its step, one per (step, copy) however many agents
    share it)."""

    def __init__(self, own: np.ndarray, joint: np.ndarray, index: np.ndarray):
        self.own, self.joint, self.index = own, joint, index

    def __len__(self) -> int:
        return len(self.own)

    def take(self, rows: Any = slice(None)) -> np.ndarray:
        """The rows' whole inputs, side by side."""
        own = self.own[rows]
        return np.concatenate([own, self.joint[self.index[rows]].astype(own.dtype, copy=False)],
                              axis=1)

    def select(self, rows: np.ndarray) -> Joined:
        return Joined(self.own[rows], self.joint, self.index[rows])


def _take(x: np.ndarray | Joined, rows: Any = slice(None)) -> np.ndarray:
    return x.take(rows) if isinstance(x, Joined) else x[rows]


def _select(x: np.ndarray | Joined, rows: np.ndarray) -> np.ndarray | Joined:
    return x.select(rows) if isinstance(x, Joined) else x[rows]


class PPOSettings(AlgoSettings):
    mutable: ClassVar[dict[str, tuple[float, float]]] = {
        "lr": (1e-5, 1e-2), "ent_coef": (0.0, 0.1), "clip": (0.05, 0.5), "gamma": (0.9, 0.999),
        "gae_lambda": (0.8, 1.0), "epochs": (1, 20), "minibatches": (1, 32)}
    supports_recurrent: ClassVar[bool] = True
    rollout: int = Field(100, ge=1, le=MAX_SIZE)
    """Steps of each copy per rollout (the T of its ``[T, E, k]`` arrays): an update comes
    every ``rollout`` × ``env.num_envs`` env steps."""
    epochs: int = Field(10, ge=1, le=MAX_COUNT)
    """Passes over each rollout per update."""
    minibatches: int = Field(2, ge=1, le=MAX_SIZE)
    """Gradient steps per epoch (each on an equal share of the rollout)."""
    lr: float = Field(7e-4, gt=0, le=MAX_LR)
    """Adam's learning rate at the start."""
    lr_decay_steps: int = Field(0, ge=0, le=MAX_STEPS)
    """Env steps over which the learning rate falls linearly to zero (``train.steps`` anneals
    over the whole run); 0 keeps it constant."""
    gamma: float = Field(0.99, ge=0, le=1)
    """Discount per transition (per agent turn in turn-based envs)."""
    gae_lambda: float = Field(0.95, ge=0, le=1)
    """GAE's lambda: 0 is one-step TD, 1 is Monte Carlo."""
    clip: float = Field(0.2, gt=0, le=MAX_COEF)
    """PPO's clip range for the probability ratio."""
    ent_coef: float = Field(0.01, ge=0, le=MAX_COEF)
    """Weight of the entropy bonus."""
    vf_coef: float = Field(0.5, ge=0, le=MAX_COEF)
    """Weight of the value loss."""
    max_grad_norm: float = Field(0.5, gt=0, le=MAX_COEF)
    """Gradient-norm clip, applied to the actor and to the critic separately."""
    norm_adv: bool = True
    """Normalise advantages over each rollout."""
    norm_value: bool = False
    """The critic predicts returns standardised by their running mean and std (on spread this
    made the policy worse; on speaker_listener it did no harm)."""
    norm_obs: bool = True
    """Standardise observations by their running mean and std (updated after each update)."""
    centralised_critic: bool = False
    """The critic also sees the joint observation of the agent's env copy (MAPPO)."""
    share_params: bool = True
    """One actor and one critic for all agents of a policy; false gives each agent its own."""
    model: ModelSettings = Field(default_factory=ModelSettings)
    """The actor and critic networks (``policies.<pid>.model`` overrides any of these for one
    policy)."""
    log_std_init: float = Field(0.0, ge=-20.0, le=5.0)
    """Initial log-std of the Gaussian policy for Box actions."""


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


class _Policy:
    """One trained policy's networks, optimiser and normalisers."""

    def __init__(self, spec: PolicySpec, s: PPOSettings, own: ObsInput,
                 critic_in: list[tuple[ObsInput | int, int]], device: str):
        k = len(spec.agents)
        self.spec = spec
        self.dist = ActionDist(spec.action_view)
        dist, model, where = self.dist, own.model, own.where
        self.model = model
        self.recurrent = model.recurrent != "none"
        if self.recurrent:
            if not s.share_params and k > 1:
                raise ConfigError(
                    f"algo.share_params: false with {where}.recurrent: {model.recurrent} "
                    f"(policy {spec.id!r}): recurrent policies share one network among their "
                    "agents")
            self.actor: Any = recurrent_net(model, [(own, 1)], dist.net_out, 0.01, where,
                                            dist.head(s.log_std_init)).to(device)
            self.critic: Any = recurrent_net(model, critic_in, 1, 1.0, where).to(device)
        else:
            self.actor = agent_nets(lambda: torch.nn.Sequential(
                network(model, [(own, 1)], dist.net_out, 0.01, where),
                dist.head(s.log_std_init)), k, s.share_params).to(device)
            self.critic = agent_nets(lambda: network(model, critic_in, 1, 1.0, where), k,
                                     s.share_params).to(device)
        self.optimizer = torch.optim.Adam(
            [*self.actor.parameters(), *self.critic.parameters()], lr=s.lr, eps=1e-5)
        # Image frames are scaled to [0, 1] in the networks, not standardised.
        self.image = is_image(spec.obs_space)
        self.obs_norm = RunningMeanStd((spec.obs_dim,)) if s.norm_obs and not self.image else None
        self.ret_norm = RunningMeanStd() if s.norm_value else None

    def observe(self, obs: np.ndarray) -> np.ndarray:
        """What the networks are handed: observations standardised with the frozen statistics,
        or image frames as they are (bytes stay bytes until the device)."""
        if self.image:
            return obs
        if self.obs_norm is None:
            return obs.astype(np.float32)
        return self.obs_norm.normalize(obs, OBS_CLIP)

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


class PPOActor:
    """Samples one policy's actions (greedy when not exploring) and keeps their log-probs."""

    squashed = True  # Box actions live in [-1, 1] for the Gaussian; the runner maps them
    wants_env_obs = False

    def __init__(self, policy: _Policy, rng: np.random.Generator, device: str):
        self.policy = policy
        self.rng = rng
        self.device = device
        self._memory: dict[str, np.ndarray] = {}  # for callers that keep no memory of their own

    def act(self, batch: ActBatch, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        p = self.policy
        n = batch.obs.shape[0]
        extras: dict[str, np.ndarray] = {}
        with torch.no_grad():
            obs = _tensor(p.observe(batch.obs), self.device)
            if p.recurrent:
                out, extras["state"] = self._recurrent_step(batch, obs)
            else:
                out = p.actor(obs, _tensor(_slots(batch, p), self.device))
            mask = _mask_tensor(batch.mask, self.device)
            action = p.dist.sample(out, mask, self.rng, explore)
            logp, _ = p.dist.log_prob_entropy(out, mask, action)
        view = p.spec.action_view
        extras["logp"] = logp.cpu().numpy()
        return action.cpu().numpy().astype(view.dtype).reshape(n, *view.shape), extras

    def _recurrent_step(self, batch: ActBatch, obs: torch.Tensor) -> tuple[torch.Tensor, np.ndarray]:
        """The actor's output from each agent's remembered state, which it then advances; and
        the state each action was taken from (reset where an agent's episode starts)."""
        p = self.policy
        n = obs.shape[0]
        env = batch.env if batch.env is not None else np.zeros(n, np.int64)
        slot = _slots(batch, p)
        memory = batch.memory if batch.memory is not None else self._memory
        size = p.actor.state_size
        held = memory.get("state")
        copies = int(env.max(initial=0)) + 1
        if held is None or held.shape[0] < copies:
            grown = np.zeros((copies, len(p.spec.agents), size), np.float32)
            if held is not None:
                grown[:held.shape[0]] = held
            held = memory["state"] = grown
        state = held[env, slot]
        if batch.first is not None:
            state[batch.first] = 0.0
        out, new = p.actor.step(obs, torch.from_numpy(state).to(self.device))
        held[env, slot] = new.cpu().numpy()
        return out, state

class PPO(Algorithm):
    family = "ppo"
    Settings = PPOSettings
    settings: PPOSettings
    gauges = frozenset({"lr"})
    metric_docs = {
        "lr": "the learning rate of the last update (it falls linearly to 0 over "
              "`algo.lr_decay_steps` when that is set)",
        "policy_loss/<policy>": "the clipped surrogate policy loss, mean over epochs and minibatches",
        "value_loss/<policy>": "half the squared error of the critic's value against its return "
                               "target (in normalised units with `algo.norm_value`)",
        "entropy/<policy>": "the mean entropy of the policy's action distribution",
        "approx_kl/<policy>": "the approximate KL divergence of the updated policy from the one "
                              "that collected the rollout, mean of (ratio - 1) - log(ratio)",
        "clip_frac/<policy>": "the fraction of samples whose probability ratio left "
                              "[1 - clip, 1 + clip]",
        "explained_variance/<policy>": "1 - Var(return - value) / Var(return) of the critic "
                                       "before the update: 1 is a perfect critic, 0 or less "
                                       "is no better than a constant",
    }

    def __init__(self, settings: PPOSettings, specs: dict[str, PolicySpec], device: str,
                 seed: int, state_space: spaces.Box | None = None):
        """``state_space``: the global state the env keeps (None if it keeps none); a
        centralised critic reads it instead of the joined observations unless ``algo.state``
        is ``observations``."""
        mode = getattr(settings, "state", "observations")
        state = read_state(mode, state_space, "the critic")
        self.env_state = state if settings.centralised_critic else None
        super().__init__(settings, specs, device, seed)
        self.trained = [pid for pid, spec in specs.items() if spec.trainable]
        inputs = {pid: obs_input(specs[pid], policy_model(settings, specs[pid]),
                                 model_key(specs[pid])) for pid in self.trained}
        # The joint observation: every trained agent's observation side by side.
        self.joint_at: dict[str, int] = {}
        width = 0
        for pid in self.trained:
            self.joint_at[pid] = width
            width += len(specs[pid].agents) * specs[pid].obs_dim
        self.joint_dim = width if settings.centralised_critic else 0
        if self.env_state is not None:
            self.joint_dim = state_dim(self.env_state)
        self.policies: dict[str, _Policy] = {}
        with torch.random.fork_rng(devices=[]):
            for pid in self.trained:
                torch.manual_seed(int(rng_for(seed, self.name, "init", pid).integers(2**63)))
                joint = [(inputs[q], len(specs[q].agents)) for q in self.trained]
                if self.env_state is not None:
                    joint = [(self.joint_dim, 1)]  # type: ignore[list-item]
                self.policies[pid] = _Policy(specs[pid], settings, inputs[pid],
                                             [(inputs[pid], 1), *(joint if self.joint_dim else [])],
                                             device)
        self.act_rngs = {pid: rng_for(seed, self.name, "act", pid) for pid in self.trained}
        self.shuffle_rng = rng_for(seed, self.name, "shuffle")
        self._actors = {pid: PPOActor(self.policies[pid], self.act_rngs[pid], device)
                        for pid in self.trained}
        # The recurrent critics' state after each agent's last transition, [E * k, S] per
        # policy: the next rollout's sequences go on from there.
        self.critic_state: dict[str, np.ndarray] = {}
        self.recurrent = any(p.recurrent for p in self.policies.values())
        self._past_steps = 0  # the run's env steps before the current rollout
        self._env_steps = 0  # the run's env steps, as last told
        self.updates = 0

    def actor(self, pid: str) -> PPOActor:
        return self._actors[pid]

    def make_storage(self, num_envs: int) -> RolloutStorage:
        """The rollout, refused up front when the arrays an update builds from it cannot fit."""
        s = self.settings
        rows = s.rollout * num_envs * sum(len(self.specs[p].agents) for p in self.trained)
        own = max(self.specs[p].obs_dim for p in self.trained) if self.trained else 0
        wide = own + self.joint_dim
        # Observations and next observations as arrays and tensors, a few float32 copies of
        # each; the joint table (one row per step and copy, for both); the critic inputs
        # joined for a chunk of values and for a minibatch (for a recurrent critic, for every
        # row at once).
        joined = rows if self.recurrent and self.joint_dim else (
            min(rows, VALUE_CHUNK) + -(-rows // s.minibatches))
        need = 4 * (rows * own * 8 + s.rollout * num_envs * self.joint_dim * 4 + joined * wide * 3)
        check_fits(need,
                   "algo.centralised_critic" if self.joint_dim else "algo.rollout",
                   f"a rollout of {s.rollout} steps of {num_envs} copies ({rows:,} rows, each "
                   f"with {wide:,} critic inputs)",
                   "lower algo.rollout or env.num_envs" + (
                       ", or use ippo (algo.centralised_critic: false)" if self.joint_dim else ""))
        return RolloutStorage({p: len(self.specs[p].agents) for p in self.trained}, num_envs,
                              s.rollout)

    def ready(self, storage: RolloutStorage, env_steps: int) -> bool:
        """True when the rollout is full."""
        self._env_steps = env_steps
        return storage.steps >= self.settings.rollout

    def steps_to_update(self, storage: RolloutStorage) -> int:
        return max(1, self.settings.rollout - storage.steps)

    # -- update: bootstrap, advantages, epochs x minibatches ------------------------------
    def update(self, storage: RolloutStorage) -> dict[str, float]:
        s = self.settings
        lr = s.lr
        if s.lr_decay_steps:
            lr *= max(0.0, 1.0 - self._past_steps / s.lr_decay_steps)
        data = {}
        for pid in self.trained:
            rollout = storage.rollout(pid)
            if rollout is not None:
                data[pid] = self._gather(pid, rollout)
        if s.centralised_critic and data:
            if self.env_state is not None:
                self._add_state(data)
            else:
                self._add_joint(data)
        metrics: dict[str, float] = {"lr": lr}
        learning = {pid: d for pid, d in data.items() if pid not in self.frozen}
        for pid, d in learning.items():
            adv, target, explained = self._advantages(pid, d)
            metrics.update(self._optimise(pid, d, adv, target, lr))
            metrics[f"explained_variance/{pid}"] = explained
        for pid, d in learning.items():
            norm = self.policies[pid].obs_norm
            if norm is not None:
                norm.update(d["raw_obs"])
        storage.clear()
        self._past_steps = self._env_steps
        self.updates += 1
        return metrics

    def _gather(self, pid: str, r: Rollout) -> dict[str, Any]:
        """One policy's rollout as rows (its transitions in ``(t, e, j)`` order), observations
        standardised as when acting; ``at`` keeps each row's cell."""
        policy = self.policies[pid]
        at = np.nonzero(r.valid)
        obs = r.obs[at]
        return {
            "rollout": r, "at": at, "raw_obs": obs, "obs": policy.observe(obs),
            "next_obs": policy.observe(r.next_obs[at]), "action": r.action[at],
            "logp": r.extras["logp"][at], "mask": None if r.mask is None else r.mask[at],
            "terminated": r.terminated[at], "env": at[1], "slot": at[2], "step": r.step[at],
        }

    def _add_state(self, data: dict[str, dict[str, Any]]) -> None:
        """Give each row's critic the env's global state when it acted, and after its step:
        rows of the rollout's table of states, one per (tick, copy) (see :class:`Joined`)."""
        for pid, d in data.items():
            r, at = d["rollout"], d["at"]
            if r.states is None or r.state is None or r.next_state is None:
                raise ValueError(f"algo.state: the rollout of policy {pid!r} holds no global "
                                 "state, though its critic reads one")
            d["critic_obs"] = Joined(d["obs"], r.states, r.state[at])
            d["critic_next_obs"] = Joined(d["next_obs"], r.states, r.next_state[at])

    def _add_joint(self, data: dict[str, dict[str, Any]]) -> None:
        """Give each row's critic the joint observation of its copy at that step, kept once
        per (step, copy) in a table and joined to the rows only where they are used (see
        :class:`Joined`), so memory grows with the agents, not with their square.

        Agents that closed no transition in that step (turn-based envs, agents that left)
        leave zeros in their place.
        """
        steps, at = np.unique(np.concatenate([d["step"] for d in data.values()]),
                              return_inverse=True)
        bounds = np.cumsum([0] + [len(d["step"]) for d in data.values()])
        copies = max(int(d["env"].max()) for d in data.values()) + 1
        for d, lo, hi in zip(data.values(), bounds[:-1], bounds[1:], strict=True):
            d["joint_index"] = at[lo:hi] * copies + d["env"]
        for key in ("obs", "next_obs"):
            dtype = np.result_type(*(d[key].dtype for d in data.values()))
            joint = np.zeros((len(steps) * copies, self.joint_dim), dtype)
            for pid, d in data.items():
                dim = self.specs[pid].obs_dim
                cols = self.joint_at[pid] + d["slot"][:, None] * dim + np.arange(dim)
                joint[d["joint_index"][:, None], cols] = d[key]
            for d in data.values():
                d["critic_" + key] = Joined(d[key], joint, d["joint_index"])

    def _advantages(self, pid: str, d: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, float]:
        """Advantages, the critic's targets, and how much of the returns' variance it explains."""
        s = self.settings
        p = self.policies[pid]
        r: Rollout = d["rollout"]
        at = d["at"]
        x, next_x = d.get("critic_obs", d["obs"]), d.get("critic_next_obs", d["next_obs"])
        follows = r.follows()
        # Where an agent's sequence goes on, its next value is the next cell's value; only
        # the others (a truncated episode, the rollout's end) are valued on their own.
        rest = ~follows[at] & ~d["terminated"]  # a terminated row's next value is never used
        cells = tuple(i[rest] for i in at)
        value = np.zeros(r.valid.shape)
        next_value = np.zeros_like(value)
        if p.recurrent:
            value[...], after = self._critic_pass(pid, p, d, x)
            if rest.any():
                next_value[cells] = self._recurrent_values(p, _take(next_x, rest), after[cells])
        else:
            value[at] = self._values(p, x, d["slot"])
            if rest.any():
                next_value[cells] = self._values(p, _select(next_x, rest), d["slot"][rest])
        next_value[:-1] = np.where(follows[:-1], value[1:], next_value[:-1])
        adv_all, ret_all = gae(r.reward, value, next_value, r.terminated, follows,
                               s.gamma, s.gae_lambda)
        adv, ret = adv_all[at], ret_all[at]
        explained = float(1.0 - np.var(ret - value[at]) / max(np.var(ret), 1e-8))
        target = ret
        if p.ret_norm is not None:
            p.ret_norm.update(ret)
            target = (ret - p.ret_norm.mean) / p.ret_norm.std
        if s.norm_adv:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        return adv, target, explained

    def _values(self, p: _Policy, x: np.ndarray | Joined, slot: np.ndarray) -> np.ndarray:
        """The critic's values of inputs ``x``, in return units (joined inputs a chunk at a
        time)."""
        if isinstance(x, Joined):
            step = VALUE_CHUNK
            return np.concatenate([self._values(p, x.take(slice(i, i + step)), slot[i:i + step])
                                   for i in range(0, len(x), step)] or [np.zeros(0)])
        with torch.no_grad():
            v = p.critic(_tensor(x, self.device), _tensor(slot, self.device))
        return self._return_units(p, v.squeeze(-1))

    def _return_units(self, p: _Policy, v: torch.Tensor) -> np.ndarray:
        out = v.cpu().numpy().astype(np.float64)
        if p.ret_norm is not None:
            out = out * p.ret_norm.std + p.ret_norm.mean
        return out

    def _recurrent_values(self, p: _Policy, x: np.ndarray, state: np.ndarray) -> np.ndarray:
        """The recurrent critic's values of inputs ``x`` from ``state``, in return units."""
        with torch.no_grad():
            v, _ = p.critic.step(_tensor(x, self.device), _tensor(state, self.device))
        return self._return_units(p, v.squeeze(-1))

    def _critic_pass(self, pid: str, p: _Policy, d: dict[str, Any],
                     x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The recurrent critic run along every agent's sequence, from where the last rollout
        left it: values ``[T, E, k]`` in return units, and the state after each cell
        ``[T, E, k, S]``. Keeps the states each cell started from for the update."""
        r: Rollout = d["rollout"]
        T, E, k = r.shape
        rows = _take(x)
        grid = np.zeros((T, E, k, rows.shape[1]), rows.dtype)
        grid[d["at"]] = rows
        size = p.critic.state_size
        start = self.critic_state.get(pid)
        if start is None or start.shape != (E * k, size):
            start = np.zeros((E * k, size), np.float32)
        dev = self.device
        with torch.no_grad():
            v, states = p.critic.sequence(
                _tensor(grid.reshape(T, E * k, -1), dev), _tensor(start, dev),
                _tensor(r.first.reshape(T, E * k), dev), _tensor(r.valid.reshape(T, E * k), dev))
        states_np = states.cpu().numpy()
        self.critic_state[pid] = states_np[-1]
        d["critic_states"] = states_np
        return (self._return_units(p, v.squeeze(-1)).reshape(T, E, k),
                states_np[1:].reshape(T, E, k, size))

    def _optimise(self, pid: str, d: dict[str, Any], adv: np.ndarray, target: np.ndarray,
                  lr: float) -> dict[str, float]:
        """Epochs x minibatches of clipped policy-gradient, value and entropy steps: over rows,
        or, for recurrent networks, over sequences of ``seq_len`` cells."""
        s = self.settings
        p = self.policies[pid]
        for group in p.optimizer.param_groups:
            group["lr"] = lr
        n, pick = (self._sequences if p.recurrent else self._rows)(p, d, adv, target)
        size = -(-n // s.minibatches)
        sums = np.zeros(5)
        for _ in range(s.epochs):
            order = _tensor(self.shuffle_rng.permutation(n), self.device)
            for start in range(0, n, size):
                out, value, action, logp_old, a, tgt, mask = pick(order[start:start + size])
                logp, entropy = p.dist.log_prob_entropy(out, mask, action)
                log_ratio = logp - logp_old
                ratio = log_ratio.exp()
                policy_loss = -torch.min(ratio * a, ratio.clamp(1 - s.clip, 1 + s.clip) * a).mean()
                value_loss = 0.5 * (value - tgt).pow(2).mean()
                loss = policy_loss - s.ent_coef * entropy.mean() + s.vf_coef * value_loss
                if not torch.isfinite(loss):
                    raise FloatingPointError(
                        f"policy {pid!r}: the PPO loss is {loss.item()} in update {self.updates} "
                        f"(policy loss {policy_loss.item()}, value loss {value_loss.item()}, "
                        f"entropy {entropy.mean().item()})")
                p.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(p.actor.parameters(), s.max_grad_norm)
                torch.nn.utils.clip_grad_norm_(p.critic.parameters(), s.max_grad_norm)
                p.optimizer.step()
                with torch.no_grad():
                    sums += [policy_loss.item(), value_loss.item(), entropy.mean().item(),
                             ((ratio - 1) - log_ratio).mean().item(),
                             ((ratio - 1).abs() > s.clip).float().mean().item()]
        sums /= s.epochs * -(-n // size)
        names = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac")
        return {f"{name}/{pid}": float(v) for name, v in zip(names, sums, strict=True)}

    def _rows(self, p: _Policy, d: dict[str, Any], adv: np.ndarray,
              target: np.ndarray) -> tuple[int, Any]:
        """Minibatches of rows: how many rows, and what a minibatch of row indices gives."""
        dev = self.device
        obs, slot = _tensor(d["obs"], dev), _tensor(d["slot"], dev)
        critic = d.get("critic_obs")
        if critic is None:
            own, joint, index = _tensor(d["obs"], dev), None, None
        else:
            own, joint, index = (_tensor(critic.own, dev), _tensor(critic.joint, dev),
                                 _tensor(critic.index, dev))

        def critic_in(i: torch.Tensor) -> torch.Tensor:
            if joint is None or index is None:
                return own[i]
            return torch.cat([own[i], joint[index[i]].to(own.dtype)], dim=1)

        action, logp_old = _tensor(d["action"], dev), _tensor(d["logp"], dev)
        mask = _mask_tensor(d["mask"], dev)
        adv_t = _tensor(adv.astype(np.float32), dev)
        target_t = _tensor(target.astype(np.float32), dev)

        def pick(i: torch.Tensor) -> tuple:
            return (p.actor(obs[i], slot[i]), p.critic(critic_in(i), slot[i]).squeeze(1),
                    action[i], logp_old[i], adv_t[i], target_t[i],
                    None if mask is None else mask[i])

        return len(adv), pick

    def _sequences(self, p: _Policy, d: dict[str, Any], adv: np.ndarray,
                   target: np.ndarray) -> tuple[int, Any]:
        """Minibatches of sequences: each agent's sequence cut into pieces of at most
        ``seq_len`` cells that never span two episodes (see :meth:`Rollout.pieces`). A piece
        starts from the actor's state when it took the piece's first action, and from the
        critic's state in the pass that valued the rollout."""
        r: Rollout = d["rollout"]
        at = d["at"]
        piece, offset, n = r.pieces(p.model.seq_len)
        where = (offset[at], piece[at])  # each row's cell in [L, n]
        L = int(where[0].max()) + 1  # the longest piece (short episodes make short pieces)
        dev = self.device

        def seq(rows: np.ndarray) -> torch.Tensor:
            grid = np.zeros((L, n, *rows.shape[1:]), rows.dtype)
            grid[where] = rows
            return _tensor(grid, dev)

        heads = where[0] == 0  # the rows each piece starts with
        order = np.argsort(where[1][heads])
        actor_start = _tensor(np.ascontiguousarray(r.extras["state"][at][heads][order]), dev)
        k = r.shape[2]
        states = d["critic_states"][at[0], at[1] * k + at[2]]  # before each row
        critic_start = _tensor(np.ascontiguousarray(states[heads][order]), dev)
        valid = seq(np.ones(len(adv), bool))
        obs, critic_obs = seq(d["obs"]), seq(_take(d.get("critic_obs", d["obs"])))
        first = seq(r.first[at])
        action, logp_old = seq(d["action"]), seq(d["logp"])
        adv_t, target_t = seq(adv.astype(np.float32)), seq(target.astype(np.float32))
        mask = None if d["mask"] is None or d["mask"].all() else seq(d["mask"])

        def pick(i: torch.Tensor) -> tuple:
            v = valid[:, i]
            out, _ = p.actor.sequence(obs[:, i], actor_start[i], first[:, i], v)
            value, _ = p.critic.sequence(critic_obs[:, i], critic_start[i], first[:, i], v)
            return (out[v], value.squeeze(-1)[v], action[:, i][v], logp_old[:, i][v],
                    adv_t[:, i][v], target_t[:, i][v], None if mask is None else mask[:, i][v])

        return n, pick

    # -- state -----------------------------------------------------------------------------
    def warm_parts(self, pid: str) -> WarmParts:
        # The observation statistics go with the actor: it acts on observations scaled by them.
        p = self.policies[pid]
        actor = {"actor": p.actor, **({"obs_norm": p.obs_norm} if p.obs_norm is not None else {})}
        rest = {"critic": p.critic, **({"ret_norm": p.ret_norm} if p.ret_norm is not None else {})}
        return WarmParts(actor, rest)

    def greedy_net(self, pid: str) -> GreedyPolicy:
        p = self.policies[pid]
        norm = Standardise(p.obs_norm, OBS_CLIP) if p.obs_norm is not None else None
        sizes = None if p.dist.kind == "box" else p.dist.sizes
        # one agent's actor (the first's, when each has its own), as load_policy acts
        actor = p.actor if p.recurrent else p.actor.agent(0)
        return GreedyPolicy(actor, sizes, getattr(p.dist, "dim", 0), norm, p.recurrent)

    def state_dict(self) -> dict[str, Any]:
        return copy.deepcopy({
            "policies": {pid: p.state_dict() for pid, p in self.policies.items()},
            "act_rngs": {pid: r.bit_generator.state for pid, r in self.act_rngs.items()},
            "shuffle_rng": self.shuffle_rng.bit_generator.state,
            "past_steps": self._past_steps, "env_steps": self._env_steps,
            "updates": self.updates, "critic_state": self.critic_state,
        })

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = copy.deepcopy(state)
        for pid, p in self.policies.items():
            p.load_state_dict(state["policies"][pid])
            self.act_rngs[pid].bit_generator.state = state["act_rngs"][pid]
        self.shuffle_rng.bit_generator.state = state["shuffle_rng"]
        self._past_steps, self._env_steps = state["past_steps"], state["env_steps"]
        self.updates = state["updates"]
        self.critic_state = {pid: np.asarray(v) for pid, v in state.get("critic_state", {}).items()}


@register
class IPPO(PPO):
    """Independent PPO: each critic sees only its own agent's observation."""

    name = "ippo"


@register
class MAPPO(PPO):
    """Multi-agent PPO: critics also see the joint observation of the env copy."""

    name = "mappo"
    Settings = MAPPOSettings


def _slots(batch: ActBatch, p: _Policy) -> np.ndarray:
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


def _tensor(x: np.ndarray, device: str) -> torch.Tensor:
    # The runner hands read-only views of its buffers (masks, say); torch wants memory it
    # may write to, so those alone are copied.
    return torch.from_numpy(np.require(x, requirements=("C", "W"))).to(device)


def _mask_tensor(mask: np.ndarray | None, device: str) -> torch.Tensor | None:
    """Legal actions as a tensor, or None when every action is legal (nothing to mask)."""
    if mask is None or mask.all():
        return None
    return _tensor(mask, device)

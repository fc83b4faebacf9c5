"""What the on-policy actor-critic learners share: acting, the rollout, and the update loop.

An algorithm over this base (``class PPO(OnPolicy)``) supplies its settings and
:meth:`OnPolicy.loss`; the base does the rest, in the order it happens:

1. act: sample each policy's actions and keep their log-probabilities (:class:`OnPolicyActor`);
2. collect ``rollout`` steps of every copy into the loop's ``[T, E, k]`` rollout storage,
   refused up front when an update's arrays cannot fit (:meth:`OnPolicy.make_storage`);
3. bootstrap: value every transition and the next observations where a sequence stops;
4. advantages per agent sequence by GAE (:func:`interplay.data.returns.gae`);
5. epochs × minibatches of gradient steps on :meth:`OnPolicy.loss`, then the metrics.

Each trained policy has an actor and a critic (:class:`~interplay.algos.onpolicy.nets.ActorCritic`).
A centralised critic (``centralised_critic``) also reads the joint observation of the agent's
copy or the env's global state (see :mod:`interplay.algos.onpolicy.samples`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, NamedTuple

import numpy as np
import torch
from gymnasium import spaces
from pydantic import Field, field_validator, model_validator

from interplay.algos.base import Algorithm, AlgoSettings, WarmParts, read_state
from interplay.algos.onpolicy.acting import OnPolicyActor
from interplay.algos.onpolicy.nets import OBS_CLIP, ActorCritic, tensor
from interplay.algos.onpolicy.recurrent import CriticPass, sequence_minibatches
from interplay.algos.onpolicy.samples import (
    CriticInput,
    CriticInputs,
    Minibatch,
    PolicySamples,
    critic_values,
    joint_inputs,
    own_inputs,
    policy_samples,
    row_minibatches,
    state_inputs,
)
from interplay.algos.onpolicy.teacher import (
    Advised,
    TeacherReplay,
    teacher_coef,
    teacher_cross_entropy,
    teachers,
)
from interplay.config.code import NamesCode, is_code_path
from interplay.config.limits import MAX_COEF, MAX_COUNT, MAX_LR, MAX_SIZE, MAX_STEPS
from interplay.config.model import ModelSettings
from interplay.data.ram import check_fits
from interplay.data.returns import gae
from interplay.data.rollout import RolloutStorage
from interplay.envs.batch import state_dim
from interplay.errors import UserError
from interplay.nets.attention import TokenLayout, attention_critic
from interplay.nets.build import ObsInput, model_key, obs_input, policy_model
from interplay.nets.greedy import GreedyPolicy, Standardise
from interplay.run.mapping import PolicySpec
from interplay.seeding import rng_for

VALUE_CHUNK = 65_536  # rows of joined critic inputs valued at once


class OnPolicySettings(AlgoSettings):
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
    """The critic also sees the joint observation of the agent's env copy (as MAPPO's does)."""
    share_params: bool = True
    """One actor and one critic for all agents of a policy; false gives each agent its own."""
    model: ModelSettings = Field(default_factory=ModelSettings)
    """The actor and critic networks (``policies.<pid>.model`` overrides any of these for one
    policy)."""
    log_std_init: float = Field(0.0, ge=-20.0, le=5.0)
    """Initial log-std of the Gaussian policy for Box actions."""
    teacher: Annotated[str | None, NamesCode("attr")] = None
    """A player whose advice the actors also learn to follow (kickstarting), as
    ``module:function``: ``fn(observation, agent_id)``, called as a scripted policy is (given
    ``action_mask=`` where it takes that keyword), returns a move, a list of moves it finds
    equally good (for a Discrete action space), or None where it has no advice. While
    training it is asked at every move a trained policy makes, and each gradient step adds
    ``teacher_coef`` times minus the log of the probability the policy gives the advised
    moves, averaged over the moves it advised on. For Discrete and MultiDiscrete actions and
    feed-forward networks; league snapshots, exploiters and ``interplay exploit``'s best
    response learn without it."""
    teacher_coef: float = Field(1.0, ge=0, le=MAX_COEF)
    """Weight of the teacher's cross-entropy in the loss."""
    teacher_decay_steps: int = Field(0, ge=0, le=MAX_STEPS)
    """Env steps over which ``teacher_coef`` falls linearly to zero; 0 keeps it."""
    teacher_replay: int = Field(0, ge=0, le=MAX_SIZE)
    """With a teacher: how many of the latest moves it advised on are kept across updates (0:
    none); each gradient step then also draws as many of them as the minibatch has rows, and
    the teacher's cross-entropy is averaged over those and the minibatch's advised moves. The
    policy keeps learning the advice of earlier rollouts, not only the last one's."""
    teacher_steps: int = Field(0, ge=0, le=MAX_COUNT)
    """With ``teacher_replay``: gradient steps each update adds after its epochs, on the
    teacher's cross-entropy alone (times ``teacher_coef``), each over a minibatch's worth of
    rows drawn from the replay (0: none). They teach the advice without taking a share of the
    clipped gradient of the policy's own loss."""

    @model_validator(mode="after")
    def _replay_needs_a_teacher(self) -> OnPolicySettings:
        if self.teacher_replay and self.teacher is None:
            raise ValueError("teacher_replay keeps a teacher's advice; set algo.teacher too, "
                             "or drop algo.teacher_replay")
        if self.teacher_steps and not self.teacher_replay:
            raise ValueError("teacher_steps learn from the teacher's replay; set "
                             "algo.teacher_replay too, or drop algo.teacher_steps")
        return self

    @field_validator("teacher")
    @classmethod
    def _teacher_names_a_function(cls, value: str | None) -> str | None:
        if value is not None and not is_code_path(value):
            raise ValueError(f"{value!r} must be written as module:function (a scripted "
                             "player, such as interplay.envs.connect_four:one_ply)")
        return value

    def critic_reads(self) -> str:
        """What a centralised critic reads beside the agent's own observation (``algo.state``
        where the settings have it)."""
        return "observations"


class LossTerms(NamedTuple):
    """One minibatch's loss and the parts reported as metrics (each a scalar tensor)."""

    loss: torch.Tensor  # what the gradient step lowers
    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor  # the mean entropy of the policy's actions
    more: dict[str, torch.Tensor]  # further metrics by name


class Advantages(NamedTuple):
    """What bootstrapping a policy's rollout gives its update."""

    advantage: np.ndarray  # per row, normalised with ``norm_adv``
    target: np.ndarray  # the critic's return target per row (standardised with ``norm_value``)
    explained: float  # how much of the returns' variance the critic explained before
    critic_states: np.ndarray | None  # a recurrent critic's states before each cell


class OnPolicy(Algorithm):
    Settings: ClassVar[type[AlgoSettings]] = OnPolicySettings
    settings: OnPolicySettings
    gauges = frozenset({"lr", "teacher_coef"})
    loss_name: ClassVar[str] = "on-policy"  # how errors name the loss
    supports_recurrent = True
    # A product of distributions, one per leaf, acts for Dict and Tuple action spaces.
    action_kinds = Algorithm.action_kinds | {"composite"}
    metric_docs = {
        "lr": "the learning rate of the last update (it falls linearly to 0 over "
              "`algo.lr_decay_steps` when that is set)",
        "teacher_coef": "with `algo.teacher`: the weight of the teacher's cross-entropy in the "
                        "last update (it falls linearly to 0 over `algo.teacher_decay_steps` "
                        "when that is set)",
        "teacher_ce/<policy>": "with `algo.teacher`: minus the log of the probability the "
                               "policy gives the teacher's advised moves, mean over the moves "
                               "it advised on (0 when the policy always follows it)",
        "teacher_share/<policy>": "with `algo.teacher`: the share of the policy's moves the "
                                  "teacher advised on (it returns None where it has no advice)",
        "teacher_replay_ce/<policy>": "with `algo.teacher_steps`: the teacher's cross-entropy "
                                      "over the rows those steps drew from its replay, mean "
                                      "over the steps",
        "value_loss/<policy>": "half the squared error of the critic's value against its return "
                               "target (in normalised units with `algo.norm_value`)",
        "entropy/<policy>": "the mean entropy of the policy's action distribution",
        "explained_variance/<policy>": "1 - Var(return - value) / Var(return) of the critic "
                                       "before the update: 1 is a perfect critic, 0 or less "
                                       "is no better than a constant",
    }

    def __init__(self, settings: OnPolicySettings, specs: dict[str, PolicySpec], device: str,
                 seed: int, state_space: spaces.Box | None = None):
        """``state_space``: the global state the env keeps (None if it keeps none); a
        centralised critic reads it instead of the joined observations unless ``algo.state``
        is ``observations``."""
        state = read_state(settings.critic_reads(), state_space, "the critic")
        critic_model = getattr(settings, "critic_model", None)
        # an attention critic reads the agents' observations, never a global state
        self.attention = critic_model is not None and critic_model.attention
        self.env_state = state if settings.centralised_critic and not self.attention else None
        super().__init__(settings, specs, device, seed)
        self.trained = [pid for pid, spec in specs.items() if spec.trainable]
        inputs = {pid: obs_input(specs[pid], policy_model(settings, specs[pid]),
                                 model_key(specs[pid])) for pid in self.trained}
        # The joint observation: every trained agent's observation side by side.
        joint = [(inputs[q], len(specs[q].agents)) for q in self.trained]
        self.joint_dim = sum(len(specs[q].agents) * specs[q].obs_dim for q in self.trained)
        if not settings.centralised_critic:
            self.joint_dim, joint = 0, []
        if self.env_state is not None:
            self.joint_dim = state_dim(self.env_state)
            joint = [(self.joint_dim, 1)]  # type: ignore[list-item]
        if self.attention:
            self.joint_dim += sum(len(specs[q].agents) for q in self.trained)  # live flags
        self.policies: dict[str, ActorCritic] = {}
        with torch.random.fork_rng(devices=[]):
            for pid in self.trained:
                torch.manual_seed(int(rng_for(seed, self.name, "init", pid).integers(2**63)))
                self.policies[pid] = ActorCritic(
                    specs[pid], settings, inputs[pid],
                    [(inputs[pid], 1), *(joint if self.joint_dim else [])], device,
                    critic_model, self._attention_critic(pid, inputs, critic_model))
        self.act_rngs = {pid: rng_for(seed, self.name, "act", pid) for pid in self.trained}
        self.shuffle_rng = rng_for(seed, self.name, "shuffle")
        taught = teachers(settings, specs, self.policies)
        self._actors = {pid: OnPolicyActor(self.policies[pid], self.act_rngs[pid], device,
                                           taught.get(pid))
                        for pid in self.trained}
        self.replays = {pid: TeacherReplay(settings.teacher_replay,
                                           rng_for(seed, self.name, "teacher_replay", pid))
                        for pid in taught if settings.teacher_replay}
        for pid in self.replays:  # its rows are allocated at once, on the first advice
            row = 4 * specs[pid].obs_dim + 2 * sum(self.policies[pid].dist.sizes) + 8
            check_fits(settings.teacher_replay * row, "algo.teacher_replay",
                       f"policy {pid!r}'s replay of {settings.teacher_replay:,} advised moves")
        # The recurrent critics' state after each agent's last transition, [E * k, S] per
        # policy: the next rollout's sequences go on from there.
        self.critic_state: dict[str, np.ndarray] = {}
        self.recurrent = any(p.recurrent for p in self.policies.values())
        self._past_steps = 0  # the run's env steps before the current rollout
        self._env_steps = 0  # the run's env steps, as last told
        self.updates = 0

    def _attention_critic(self, pid: str, inputs: dict[str, ObsInput],
                          critic_model: Any) -> Callable[[], torch.nn.Module] | None:
        """A maker of policy ``pid``'s attention critic (None without one): a value per agent
        from the rows' own observation, every trained agent's and their live flags."""
        if not self.attention:
            return None
        groups = [inputs[q] for q in self.trained]
        layout = TokenLayout(tuple((len(self.specs[q].agents), g.dim, 0)
                                   for q, g in zip(self.trained, groups, strict=True)),
                             lead=inputs[pid].dim, own_group=self.trained.index(pid))
        return lambda: attention_critic(layout, critic_model, groups, 1, 1.0)

    def actor(self, pid: str) -> OnPolicyActor:
        return self._actors[pid]

    # -- the rollout ------------------------------------------------------------------------
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

    def rollout_full(self, storage: RolloutStorage) -> bool:
        return storage.steps >= self.settings.rollout

    def ready(self, storage: RolloutStorage, env_steps: int) -> bool:
        """True when the rollout is full."""
        self._env_steps = env_steps
        return self.rollout_full(storage)

    def steps_to_update(self, storage: RolloutStorage) -> int:
        return max(1, self.settings.rollout - storage.steps)

    # -- update: bootstrap, advantages, epochs x minibatches ------------------------------
    def update(self, storage: RolloutStorage) -> dict[str, float]:
        s = self.settings
        lr = s.lr
        if s.lr_decay_steps:
            lr *= max(0.0, 1.0 - self._past_steps / s.lr_decay_steps)
        samples = {}
        for pid in self.trained:
            rollout = storage.rollout(pid)
            if rollout is not None:
                samples[pid] = policy_samples(self.policies[pid], rollout)
        inputs = self.critic_inputs(samples)
        metrics: dict[str, float] = {"lr": lr}
        teach = 0.0
        if s.teacher is not None:
            metrics["teacher_coef"] = teach = teacher_coef(s, self._past_steps)
        learning = [pid for pid in samples if pid not in self.frozen]
        for pid in learning:
            adv = self.advantages(pid, samples[pid], inputs[pid])
            metrics.update(self._optimise(pid, samples[pid], inputs[pid].now, adv, lr, teach))
            metrics[f"explained_variance/{pid}"] = adv.explained
        for pid in learning:
            norm = self.policies[pid].obs_norm
            if norm is not None:
                norm.update(samples[pid].raw_obs)
        storage.clear()
        self._past_steps = self._env_steps
        self.updates += 1
        return metrics

    def critic_inputs(self, samples: dict[str, PolicySamples]) -> dict[str, CriticInputs]:
        """What each policy's critic reads at its rows and at their next observations."""
        dev = self.device
        if not self.settings.centralised_critic:
            return {pid: own_inputs(s, dev) for pid, s in samples.items()}
        if self.env_state is not None:
            return {pid: state_inputs(pid, s, dev) for pid, s in samples.items()}
        groups = {q: (len(self.specs[q].agents), self.specs[q].obs_dim) for q in self.trained}
        return joint_inputs(samples, groups, dev, live=self.attention)

    def advantages(self, pid: str, s: PolicySamples, x: CriticInputs) -> Advantages:
        """Advantages, the critic's targets, and how much of the returns' variance it explains."""
        st = self.settings
        p = self.policies[pid]
        r, at = s.rollout, s.at
        follows = r.follows()
        # Where an agent's sequence goes on, its next value is the next cell's value; only
        # the others (a truncated episode, the rollout's end) are valued on their own.
        rest = ~follows[at] & ~s.terminated  # a terminated row's next value is never used
        cells = tuple(i[rest] for i in at)
        value = np.zeros(r.valid.shape)
        next_value = np.zeros_like(value)
        critic_states = None
        if p.recurrent:
            run = CriticPass(p, s, x.now, self.critic_state.get(pid), self.device)
            critic_states = run.states
            self.critic_state[pid] = run.states[-1]
            value[...] = run.value
            if rest.any():
                next_rows = x.next.select(tensor(rest, self.device)).take()
                next_value[cells] = run.next_values(p, next_rows, cells, self.device)
        else:
            value[at] = self.values(p, x.now, s.slot)
            if rest.any():
                next_value[cells] = self.values(p, x.next.select(tensor(rest, self.device)),
                                                s.slot[rest])
        next_value[:-1] = np.where(follows[:-1], value[1:], next_value[:-1])
        adv_all, ret_all = gae(r.reward, value, next_value, r.terminated, follows,
                               st.gamma, st.gae_lambda)
        adv, ret = adv_all[at], ret_all[at]
        explained = float(1.0 - np.var(ret - value[at]) / max(np.var(ret), 1e-8))
        target = ret
        if p.ret_norm is not None:
            p.ret_norm.update(ret)
            target = (ret - p.ret_norm.mean) / p.ret_norm.std
        if st.norm_adv:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        return Advantages(adv, target, explained, critic_states)

    def values(self, p: ActorCritic, x: CriticInput, slot: np.ndarray) -> np.ndarray:
        """The feed-forward critic's values of inputs ``x``, in return units (joined inputs a
        chunk at a time)."""
        if not x.joined:
            return self._value_rows(p, x, slice(None), slot)
        step = VALUE_CHUNK
        return np.concatenate([self._value_rows(p, x, slice(i, i + step), slot[i:i + step])
                               for i in range(0, x.rows, step)] or [np.zeros(0)])

    def _value_rows(self, p: ActorCritic, x: CriticInput, i: slice,
                    slot: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            v = critic_values(p.critic, x, i, tensor(slot, self.device))
        return p.return_units(v.squeeze(-1))

    def _optimise(self, pid: str, s: PolicySamples, x: CriticInput, a: Advantages,
                  lr: float, teach: float = 0.0) -> dict[str, float]:
        """Epochs x minibatches of gradient steps on :meth:`loss` (and ``teach`` times the
        teacher's cross-entropy): over rows, or, for recurrent networks, over sequences of
        ``seq_len`` cells."""
        st = self.settings
        p = self.policies[pid]
        for group in p.optimizer.param_groups:
            group["lr"] = lr
        pick: Callable[[torch.Tensor], Minibatch]
        if p.recurrent:
            assert a.critic_states is not None
            n, pick = sequence_minibatches(p, s, x, a.advantage, a.target, a.critic_states,
                                           self.device)
        else:
            n, pick = row_minibatches(p, s, x, a.advantage, a.target, self.device)
        size = -(-n // st.minibatches)
        replay = self.replays.get(pid)
        if replay is not None:
            replay.add(s)
        sums: dict[str, float] = {}
        for _ in range(st.epochs):
            order = tensor(self.shuffle_rng.permutation(n), self.device)
            for start in range(0, n, size):
                mb = pick(order[start:start + size])
                t = self.loss(p, mb)
                if mb.teacher is not None:
                    # nothing to learn from the replay once the teacher's weight is 0
                    drawn = replay.draw(p, size, self.device) if replay and teach else None
                    ce, share = teacher_cross_entropy(
                        p.dist, Advised(mb.out, mb.mask, mb.teacher), drawn)
                    t = t._replace(loss=t.loss + teach * ce,
                                   more={**t.more, "teacher_ce": ce, "teacher_share": share})
                if not torch.isfinite(t.loss):
                    raise FloatingPointError(
                        f"policy {pid!r}: the {self.loss_name} loss is {t.loss.item()} in update "
                        f"{self.updates} (policy loss {t.policy_loss.item()}, value loss "
                        f"{t.value_loss.item()}, entropy {t.entropy.item()})")
                self._step(p, t.loss)
                for name, term in (("policy_loss", t.policy_loss), ("value_loss", t.value_loss),
                                   ("entropy", t.entropy), *t.more.items()):
                    sums[name] = sums.get(name, 0.0) + term.item()
        steps = st.epochs * -(-n // size)
        out = {f"{name}/{pid}": total / steps for name, total in sums.items()}
        if replay is not None and replay.count and teach and st.teacher_steps:
            out[f"teacher_replay_ce/{pid}"] = self._distil(p, replay, size, teach)
        return out

    def _step(self, p: ActorCritic, loss: torch.Tensor) -> None:
        """One gradient step of policy ``p`` on ``loss``, each network's gradient clipped."""
        p.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(p.actor.parameters(), self.settings.max_grad_norm)
        torch.nn.utils.clip_grad_norm_(p.critic.parameters(), self.settings.max_grad_norm)
        p.optimizer.step()

    def _distil(self, p: ActorCritic, replay: TeacherReplay, size: int, teach: float) -> float:
        """``teacher_steps`` gradient steps on the teacher's cross-entropy over rows drawn
        from its replay (which holds some); their mean cross-entropy."""
        total = 0.0
        for _ in range(self.settings.teacher_steps):
            drawn = replay.draw(p, size, self.device)
            assert drawn is not None  # the replay holds rows
            ce = -p.dist.log_prob_any(*drawn)[0].mean()
            self._step(p, teach * ce)
            total += ce.item()
        return total / self.settings.teacher_steps

    def loss(self, p: ActorCritic, mb: Minibatch) -> LossTerms:
        """The loss of one minibatch of policy ``p``'s samples, and its parts."""
        raise NotImplementedError

    # -- state -----------------------------------------------------------------------------
    def warm_parts(self, pid: str) -> WarmParts:
        # The observation statistics go with the actor: it acts on observations scaled by them.
        p = self.policies[pid]
        actor = {"actor": p.actor, **({"obs_norm": p.obs_norm} if p.obs_norm is not None else {})}
        rest = {"critic": p.critic, **({"ret_norm": p.ret_norm} if p.ret_norm is not None else {})}
        return WarmParts(actor, rest)

    def greedy_net(self, pid: str) -> GreedyPolicy:
        p = self.policies[pid]
        if p.dist.kind == "composite":
            raise UserError(f"its action space {p.spec.action_space} is a Dict or Tuple, which "
                            "a greedy module cannot act in yet (use interplay.load_policy)")
        norm = Standardise(p.obs_norm, OBS_CLIP) if p.obs_norm is not None else None
        sizes = None if p.dist.kind == "box" else p.dist.sizes
        # one agent's actor (the first's, when each has its own), as load_policy acts
        actor = p.actor if p.recurrent else p.actor.agent(0)
        return GreedyPolicy(actor, sizes, getattr(p.dist, "dim", 0), norm, p.recurrent)

    def state_dict(self) -> dict[str, Any]:
        return {**self.frozen_state(), "teacher_replay": {
            pid: r.state_dict() for pid, r in self.replays.items()}}

    def frozen_state(self) -> dict[str, Any]:
        # the teacher's replay only feeds this learner's own training
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
        for pid, replay in self.replays.items():
            if pid in state.get("teacher_replay", {}):
                replay.load_state_dict(state["teacher_replay"][pid])

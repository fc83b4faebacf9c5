"""The runner: steps the copies, asks each policy once per step, books transitions.

Per step, every policy gets one batched call covering all copies and all of its agents that
must act. The runner books rewards into per-agent transitions (see ``transitions``), keeps the
stacked observations each policy sees, tracks episode returns, and calls callbacks.

By default a copy's transitions are handed out only when its episode ends (``complete_episodes``),
so an episode dropped because its env raised never reaches a learner, not even in part. With
``complete_episodes=False`` each transition is handed out in the step it closes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from interplay.envs.batch import ActionBlocks, VecEnv, VecStep
from interplay.errors import NonFiniteError
from interplay.run.actors import ActBatch, Actor, declared
from interplay.run.callbacks import CallbackList
from interplay.run.episodes import EpisodeTracker, Window
from interplay.run.mapping import PolicySpec
from interplay.run.transitions import (
    EpisodeHold,
    FrameStack,
    TransitionBook,
    Transitions,
    concat,
    table_of_row_states,
)


class _Screen:
    """:func:`_finite` for the arrays one place checks, which are mostly the same object from
    step to step (the env's fixed buffers): the flat view and the way to screen it are worked
    out once per object."""

    __slots__ = ("of", "flat", "way")

    def __init__(self) -> None:
        self.of: np.ndarray | None = None
        self.flat: Any = None
        self.way = _ALWAYS

    def __call__(self, x: np.ndarray) -> bool:
        if x is not self.of:
            self.of = x
            self.flat = x.reshape(-1) if x.flags.c_contiguous else None
            self.way = _screen_way(x, self.flat)
        way, flat = self.way, self.flat
        if way == _ALWAYS:
            return True
        screen = (flat.dot(flat) if way == _BY_DOT else sum(flat.tolist()) if way == _BY_LIST
                  else float(x.sum()))
        return math.isfinite(screen) or bool(np.isfinite(x).all())


@dataclass(slots=True)
class _Group:
    spec: PolicySpec
    actor: Actor
    book: TransitionBook | None
    stack: FrameStack | None
    obs: np.ndarray  # [E, k, obs_dim] what the policy sees now
    mask: np.ndarray | None  # [E, k, mask_dim]
    acts: np.ndarray  # [E, k] which of its agents act now
    actions: np.ndarray  # [E, k, *action_shape]; the env reads per-agent views of it
    flat_actions: np.ndarray  # [E*k, *action_shape], a view of ``actions``
    every: tuple[np.ndarray, np.ndarray]  # (copy, slot) of every row, for when all act
    none_first: np.ndarray  # [E*k] False, read-only: ``first`` when no agent starts anew
    never: np.ndarray  # [E, k] False: the flags of transitions closed by a next turn
    fresh: np.ndarray  # [E, k] the agent's next action is its first of its episode
    # what the actor keeps per copy and agent (ActBatch.recurrent_state)
    recurrent_state: dict[str, np.ndarray]
    # [E, k] which of its agents it controls in each copy's episode, for a policy that
    # train.policy_mapping_fn gives agents per episode (None: all of them, always)
    live: np.ndarray | None = None
    fresh_any: bool = True  # False: no entry of ``fresh`` is True
    screen: _Screen = dataclasses.field(default_factory=_Screen)  # of its observations
    # The actor's facts (wants_env_obs, squashed, reads_obs), read once per actor object: a
    # league may hand the group another actor.
    facts: tuple[bool, bool, bool] = (False, False, True)
    facts_of: Any = None
    # Nothing reads its observations (an actor that does not look at them, nothing booked or
    # stacked), so the env may leave them unwritten (VecEnv ``skip_obs``); ``told``: what the
    # env was last told of it; ``leaves``: the env may leave them (its block holds no agent
    # read), so ``obs`` may hold older values until they are filled in.
    unread: bool = False
    told: bool = False
    leaves: bool = False
    may_skip: bool = False  # the env can leave observations unwritten (and no callback sees them)
    # (copy, slot, [n, 0] observations) of the agents acting where only some do, kept while
    # who acts stays as it was at VecStep.acting_version ``rows_of``
    rows: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    rows_of: int | None = None
    rows_view: Any = None  # ``obs`` as rows (see whole_rows), made from ``rows_view_of``
    rows_view_of: Any = None
    batch: ActBatch | None = None  # the last one handed to the actor, all legal

    def whole_rows(self) -> np.ndarray:
        """``obs`` as ``[E·k, obs_dim]`` rows (kept while ``obs`` is the same array: most
        steps it is the env's own block)."""
        obs = self.obs
        rows = obs.reshape(obs.shape[0] * obs.shape[1], -1)
        if np.may_share_memory(rows, obs):  # a view: it follows what is written into obs
            self.rows_view_of, self.rows_view = obs, rows
        return rows

    def freshen(self, where: Any) -> None:
        """Mark the agents at ``where`` (an index into ``[E, k]``) as starting an episode."""
        self.fresh[where] = True
        self.fresh_any = True

    def actor_facts(self) -> tuple[bool, bool, bool]:
        if self.facts_of is not self.actor:
            actor = self.facts_of = self.actor
            self.facts = (declared(actor, "wants_env_obs"), declared(actor, "squashed"),
                          declared(actor, "reads_obs"))
            self.unread = (self.may_skip and self.book is None and self.stack is None
                           and not (self.facts[0] or self.facts[2]))
        return self.facts


def _whole_actions(env: VecEnv, specs: dict[str, PolicySpec]) -> np.ndarray | None:
    """One ``[1, A]`` array for every group's actions, each group's block a view of it side by
    side, where the groups hold the env's agents in its order with one kind of single-number
    actions, in one env copy (more copies would leave the views not in one piece): the env
    then reads every move off it without joining the blocks."""
    views = [s.action_view for s in specs.values()]
    if (env.num_envs != 1 or len(specs) < 2 or any(s.mapping is not None for s in specs.values())
            or [a for s in specs.values() for a in s.agents] != list(env.agents)
            or any(v.shape != () or v.dtype != views[0].dtype for v in views)):
        return None
    return np.zeros((1, len(env.agents)), views[0].dtype)


def _every(num_envs: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The (copy, slot) of every row of an ``[E, k]`` block, in order; read-only, so that
    every batch of whole blocks may share them."""
    e, s = np.repeat(np.arange(num_envs), k), np.tile(np.arange(k), num_envs)
    e.flags.writeable = s.flags.writeable = False
    return e, s


def _none_first(n: int) -> np.ndarray:
    """``[n]`` False, read-only: ``ActBatch.first`` when no agent starts its episode."""
    out = np.zeros(n, bool)
    out.flags.writeable = False
    return out


def _acting(g: _Group, step: VecStep) -> np.ndarray:
    """``[E, k]``: which of group ``g``'s agents act next (only those it controls in each
    copy's episode, where the mapping is per episode)."""
    acts = step.groups[g.spec.id].acting
    return acts if g.live is None else acts & g.live


def _seen(g: _Group, obs: np.ndarray) -> np.ndarray:
    """Group ``g``'s observations ``[E, k, ...]`` as its policy sees them (through its image
    preprocessing, if it has one)."""
    prep = g.spec.prep
    return obs if prep is None else prep(obs)


def _finite(x: np.ndarray) -> bool:
    """No NaN or inf in ``x``.

    One number screens the whole array (NaN and inf carry into it); only when it is not finite
    does the exact elementwise test run. The cheapest screen depends on the size: a Python sum
    for a handful of values, a dot product (in the array's own precision: one that overflows
    only sends it to the exact test) for arrays laid out in one piece, NumPy's sum otherwise.
    """
    return _Screen()(x)


_ALWAYS, _BY_LIST, _BY_DOT, _BY_SUM = range(4)  # how _Screen screens an array


def _screen_way(x: np.ndarray, flat: np.ndarray | None) -> int:
    """How :func:`_finite` screens ``x``: integers (image bytes, say) are always finite."""
    if x.dtype.kind in "biu":
        return _ALWAYS
    if flat is None:
        return _BY_SUM
    return _BY_LIST if x.size <= 16 else _BY_DOT


class Runner:
    def __init__(self, env: VecEnv, specs: dict[str, PolicySpec], actors: dict[str, Actor],
                 collect: Collection[str] = frozenset(), callbacks: CallbackList | None = None,
                 copies: Sequence[Any] | None = None, complete_episodes: bool = True):
        self.env = env
        self.specs = specs
        self.experiment: Any = None  # the experiment this runner trains for, if any (callbacks)
        self.callbacks = callbacks or CallbackList([])
        E = env.num_envs
        # Observations nobody reads are left unwritten where the env can (see _Group.unread);
        # not where a callback sees every step.
        may_skip = hasattr(env, "skip_obs") and not self.callbacks.wants_steps
        # From here on the env hands each policy's agents as [E, k, ...] blocks.
        env.group({pid: tuple(spec.agents) for pid, spec in specs.items()})
        whole = _whole_actions(env, specs)
        self.groups: list[_Group] = []
        at = 0
        for pid, spec in specs.items():
            k, dim = len(spec.agents), spec.obs_view.dim
            size = spec.config.stack_size
            view = spec.action_view
            actions = (np.zeros((E, k, *view.shape), view.dtype) if whole is None
                       else whole[:, at:at + k])
            at += k
            self.groups.append(_Group(
                spec=spec, actor=actors[pid],
                book=TransitionBook(E, k, spec.obs_dim, view.shape, view.dtype, view.mask_dim,
                                    spec.obs_view.dtype)
                if pid in collect else None,
                stack=FrameStack(E, k, dim, size, spec.obs_view.dtype) if size > 1 else None,
                obs=np.zeros((E, k, spec.obs_dim), spec.obs_view.dtype), mask=None,
                acts=np.zeros((E, k), bool), actions=actions,
                flat_actions=actions.reshape(E * k, *view.shape),
                every=_every(E, k), none_first=_none_first(E * k),
                never=np.zeros((E, k), bool),
                fresh=np.ones((E, k), bool), recurrent_state={},
                live=np.zeros((E, k), bool) if spec.mapping is not None else None,
                may_skip=may_skip,
            ))
        # the groups whose transitions are booked or frames stacked (see _close)
        self._closing = [g for g in self.groups if g.book is not None or g.stack is not None]
        self.mapping = next((s.mapping for s in specs.values() if s.mapping is not None), None)
        self._actions: dict[str, np.ndarray] = (
            ActionBlocks([(tuple(g.spec.agents), g.actions) for g in self.groups], whole)
            if self.mapping is None else self._merged_actions(E))
        owner = {a: pid for pid, s in specs.items() for a in s.agents}
        self.tracker = EpisodeTracker(env.agents, E, copies)
        self._reward_screen = _Screen()
        self._every_copy = np.ones(E, bool)  # ``stepped`` when every agent acted
        self._every_copy.flags.writeable = False
        self.window = Window(owner)
        self.env_steps = 0
        self.agent_steps = 0
        self.episodes = 0
        self.steps = 0  # calls of step() since reset
        # Where the env keeps a global state: a count of the states seen (one per reset or
        # step of the copies, never restarting), and the states ``[E, state_dim]`` seen at the
        # ticks some open transition acted at, so that each is handed out once per copy.
        self.ticks = 0
        self._seen: dict[int, np.ndarray] = {}
        self._step: VecStep | None = None
        self.collecting = bool(collect)
        self.holds = ({g.spec.id: EpisodeHold() for g in self.groups if g.book is not None}
                      if complete_episodes else None)
        for e in range(E):
            self.callbacks.on_env_created(
                env=copies[e] if copies else env, env_index=e, runner=self)

    def _merged_actions(self, num_envs: int) -> dict[str, np.ndarray]:
        """Each agent's ``[E, ...]`` actions as the env reads them: a view of its policy's
        block, or, for agents mapped per episode, a view of a block they share with every
        policy of their spaces (those policies' agents are the same), which the policy
        controlling each agent in each copy fills (:meth:`_merge`)."""
        out: dict[str, np.ndarray] = {}
        self._shared: list[tuple[np.ndarray, _Group]] = []
        blocks: dict[tuple[str, ...], np.ndarray] = {}
        for g in self.groups:
            if g.live is None:
                out.update((a, g.actions[:, j]) for j, a in enumerate(g.spec.agents))
                continue
            block = blocks.setdefault(g.spec.agents, np.zeros_like(g.actions))
            self._shared.append((block, g))
            out.update((a, block[:, j]) for j, a in enumerate(g.spec.agents))
        return {a: out[a] for a in self.env.agents}

    def _merge(self) -> None:
        """Hand each per-episode mapped agent's action, from the policy controlling it in each
        copy, to the env: one write per policy."""
        for block, g in self._shared:
            block[g.acts] = g.actions[g.acts]

    def _map(self, e: int) -> None:
        """Ask the per-episode mapping which policy controls each agent in copy ``e``'s new
        episode, and give each policy its agents there."""
        if self.mapping is None:
            return
        ep = self.tracker.current[e]
        ep.policies = self.mapping.choose(ep)
        self._give(e, ep.policies)

    def _give(self, e: int, policies: dict[str, str]) -> None:
        for g in self.groups:
            if g.live is not None:
                g.live[e] = [policies.get(a) == g.spec.id for a in g.spec.agents]

    def reset(self, seed: int | None) -> None:
        """Start fresh episodes in every copy, with the counters at zero."""
        self.env_steps = self.agent_steps = self.episodes = self.steps = 0
        for e in range(self.env.num_envs):
            self.tracker.drop(e)
            self._map(e)
        self._abandon(np.ones(self.env.num_envs, bool))
        step = self.env.reset(seed)
        self._tick(step)
        self._observe(step)
        self._step = step
        for e in range(self.env.num_envs):
            self.callbacks.on_episode_start(
                episode=self.tracker.current[e], env_index=e, runner=self)

    def state_dict(self) -> dict:
        """Everything needed to continue this runner exactly, the env's own state aside."""
        t, w = self.tracker, self.window
        groups = {}
        for g in self.groups:
            entry: dict = {"fresh": g.fresh.copy(),
                           "memory": {k: v.copy() for k, v in g.recurrent_state.items()}}
            if g.book is not None:
                b = g.book
                entry["book"] = {"open": b.open, "acc": b.acc, "pending": b.pending, "obs": b.obs,
                                 "action": b.action, "mask": b.mask, "extras": b.extras,
                                 "first": b.first, "at": b.at}
            if g.stack is not None:
                entry["stack"] = g.stack.buf
            if self.holds is not None and g.spec.id in self.holds:
                entry["held"] = [dataclasses.asdict(t) for t in self.holds[g.spec.id].parts]
            groups[g.spec.id] = entry
        return {
            "counters": [self.env_steps, self.agent_steps, self.episodes, self.steps],
            "states": {"ticks": self.ticks, "seen": dict(self._seen)},
            "tracker": {"ret": t.ret, "seen": t.seen, "length": t.length, "next_id": t._next_id,
                        "ids": [ep.id for ep in t.current],
                        "custom": [list(ep.custom) for ep in t.current],
                        "policies": [dict(ep.policies) for ep in t.current]},
            "window": {"totals": w.totals, "lengths": w.lengths, "by_agent": dict(w.by_agent),
                       "by_policy": dict(w.by_policy),
                       "custom": {k: [r, v] for k, (r, v) in w.custom.items()}},
            "groups": groups,
        }

    def load_state_dict(self, state: dict, episodes: bool = True) -> None:
        """Continue from :meth:`state_dict`; the env must already be back at its own state.

        With ``episodes`` False (an env whose copies could not be saved) only the counters and
        the report window come back, and the freshly reset episodes go on from there.
        """
        self.env_steps, self.agent_steps, self.episodes, self.steps = state["counters"]
        saved_states = state.get("states")
        if saved_states is not None:  # ticks go on past every saved one: keys stay unique
            self.ticks = max(self.ticks, int(saved_states["ticks"]))
        t, w = self.tracker, self.window
        wd = state["window"]
        w.reset()
        w.totals, w.lengths = list(wd["totals"]), list(wd["lengths"])
        w.by_agent.update({k: list(v) for k, v in wd["by_agent"].items()})
        w.by_policy.update({k: list(v) for k, v in wd["by_policy"].items()})
        w.custom = {k: (r, list(v)) for k, (r, v) in wd["custom"].items()}
        if not episodes:
            self._seen = {}
            self._tick(self.env.current_step())
            return
        tr = state["tracker"]
        t.restore(tr["ret"], tr["seen"], tr["length"], tr["next_id"])
        for e, (ep, ep_id, custom) in enumerate(zip(t.current, tr["ids"], tr["custom"],
                                                    strict=True)):
            ep.id, ep.custom = ep_id, [tuple(c) for c in custom]
            if self.mapping is not None:
                self.mapping.prepare(ep)
                ep.policies = dict(tr["policies"][e])
                self._give(e, ep.policies)
        for g in self.groups:
            entry = state["groups"][g.spec.id]
            if "fresh" in entry:
                g.fresh[...] = entry["fresh"]
                g.fresh_any = True
                g.recurrent_state = {k: np.array(v) for k, v in entry["memory"].items()}
            if g.book is not None:
                b, saved = g.book, entry["book"]
                b.open[...], b.acc[...], b.pending[...] = saved["open"], saved["acc"], saved["pending"]
                b.obs[...], b.action[...] = saved["obs"], saved["action"]
                if "first" in saved:
                    b.first[...] = saved["first"]
                if saved.get("at") is not None:
                    b.at = np.array(saved["at"])
                if b.mask is not None:
                    b.mask[...] = saved["mask"]
                b.extras = {k: np.array(v) for k, v in saved["extras"].items()}
                if saved_states is None and self.env.current_step().state is not None:
                    b.extras.pop("state", None)  # the env's state was each agent's own extra
            if g.stack is not None:
                g.stack.buf[...] = entry["stack"]
            if self.holds is not None and g.spec.id in self.holds:
                self.holds[g.spec.id].parts = [table_of_row_states(Transitions(**t))
                                               for t in entry.get("held", [])]
        step = self.env.current_step()
        if saved_states is not None:
            self._seen = {int(k): np.array(v) for k, v in saved_states["seen"].items()}
        elif step.state is not None:
            # saved before states were kept by tick: the open transitions take the state now
            self._seen = {}
            self._tick(step)
            for g in self.groups:
                if g.book is not None:
                    g.book.at = np.full(g.book.open.shape, self.ticks)
        for g in self.groups:
            blocks = step.groups[g.spec.id]
            g.acts = _acting(g, step)
            g.obs = (g.stack.buf.reshape(g.stack.buf.shape[0], g.stack.buf.shape[1], -1)
                     if g.stack is not None else _seen(g, blocks.obs))
            g.mask = blocks.mask
        self._step = step

    def step(self, explore: bool = True) -> dict[str, Transitions]:
        """One step of every copy; returns the transitions handed to each collecting policy.

        Those are the transitions closed in this step, or, holding whole episodes, those of
        every copy whose episode ended in this step.
        """
        step = self._step
        if step is None:
            raise RuntimeError("call reset(seed) before step()")
        acting = step.acting
        n_acting = 0  # every agent belongs to one group
        for g in self.groups:
            n = (g.acts.size if step.all_acting and g.live is None
                 else int(np.count_nonzero(g.acts)))
            if n:
                self._act(g, n, step, explore)
                n_acting += n
        if self.mapping is not None:
            self._merge()
        if n_acting == acting.size:  # everyone acts (simultaneous moves): every copy steps
            stepped, n_stepped = self._every_copy, self.env.num_envs
        else:  # the tracker hears who acted now; when all did, it learns so from ``stepped``
            stepped = acting.any(axis=1)
            n_stepped = int(np.count_nonzero(stepped))
            self.tracker.acted(acting)
        self.agent_steps += n_acting
        self.env_steps += n_stepped
        step = self.env.step(self._actions)
        self.steps += 1
        if step.state is not None:
            self._tick(step)
        # What ended in this step, worked out once (counting is the cheapest test on small
        # arrays); nothing to look at when the env says no flag is set.
        ended, ends, dropped = None, False, None
        if step.flagged:
            ended = step.terminated | step.truncated
            ends = np.count_nonzero(step.episode_end) > 0
            if step.dropped is not None and np.count_nonzero(step.dropped):
                dropped = step.dropped
        closed = self._close(step, ended, ends, dropped)
        self._step = step
        # Episodes first: a new episode's mapping decides who acts in it (see ``_map``).
        self._episodes(step, stepped, ended, ends, dropped)
        self._observe(step, closed)
        if len(self._seen) > 1:  # states of steps before this one (see _forget_states)
            self._forget_states()
        if not closed:
            return {}
        out = {pid: concat(parts) for pid, parts in closed.items() if parts}
        if not self.holds:
            return out
        full = False  # a never-ending episode holds too much: hand it out unfinished
        for pid, t in out.items():
            full |= self.holds[pid].add(t)
        if not ends and not full:
            return {}
        released = {pid: h.release(step.episode_end) for pid, h in self.holds.items()}
        return {pid: t for pid, t in released.items() if t is not None}

    def _retell(self, step: VecStep) -> None:
        """A group's actor changed whether it reads observations: tell the env whose nobody
        reads now. A group that reads them again takes in what was left unwritten first."""
        if any(g.leaves and not g.unread for g in self.groups):
            self.env.fill_obs()  # type: ignore[attr-defined]  # only envs with skip_obs skip
            for g in self.groups:
                if g.leaves and not g.unread:
                    obs = _seen(g, step.groups[g.spec.id].obs)
                    if not g.screen(obs):
                        self._check_finite(g, obs, "observation")
                    g.obs = obs
        for g in self.groups:
            g.told = g.unread
        left = self.env.skip_obs(  # type: ignore[attr-defined]  # only where _Group.may_skip
            frozenset(a for g in self.groups if g.told for a in g.spec.agents))
        for g in self.groups:
            g.leaves = g.told and left.issuperset(g.spec.agents)

    def _act(self, g: _Group, n: int, step: VecStep, explore: bool) -> None:
        # The policy is handed no mask when every action is legal; the book keeps it anyway.
        legal = step.all_legal
        masks = g.mask if g.book is not None or not legal else None
        mask = None
        wants_env_obs, squashed, reads_obs = (g.facts if g.facts_of is g.actor
                                              else g.actor_facts())
        if g.unread is not g.told:
            self._retell(step)
        version = step.acting_version
        if version != g.rows_of:  # who acts changed: an agent marked fresh may act now
            g.rows_of, g.rows, g.fresh_any = version, None, True
        whole = n == g.acts.size
        if whole:  # everyone acts (simultaneous moves): reshape instead of gathering
            e, s = g.every
            obs = g.rows_view if g.obs is g.rows_view_of else g.whole_rows()
            if masks is not None:
                mask = masks.reshape(n, -1)
            if g.fresh_any:
                first = g.fresh.reshape(n).copy()
                g.fresh[...] = False
                g.fresh_any = False
            else:
                first = g.none_first
        else:
            if g.rows is None or version is None or g.live is not None:
                # Worked out again where who acts changed (kept while the env says it holds).
                e, s = np.nonzero(g.acts)
                e.flags.writeable = s.flags.writeable = False
                g.rows = (e, s, np.empty((n, 0), g.obs.dtype))
            e, s, empty = g.rows
            obs = g.obs[e, s] if g.book is not None or reads_obs else empty
            if masks is not None:
                mask = masks[e, s]
            if g.fresh_any:
                first = g.fresh[e, s]
                if first.any():
                    g.fresh[e, s] = False
                elif version is not None and g.live is None:
                    # None of these is: agents marked (those that left) act again only after
                    # who acts changed, which looks again.
                    g.fresh_any = False
            else:
                first = g.none_first[:n]
        batch = g.batch
        if (batch is None or batch.obs is not obs or batch.first is not first or not legal
                or batch.env is not e or batch.recurrent_state is not g.recurrent_state
                or wants_env_obs):  # the same batch as last step is handed again
            batch = ActBatch(obs=obs, mask=None if legal else mask, slot=s, env=e, first=first,
                             recurrent_state=g.recurrent_state)
            g.batch = batch if legal and not wants_env_obs else None
        if wants_env_obs:
            agents = g.spec.agents
            batch.agent_ids = [agents[j] for j in s]
            if step.raw_obs is not None:
                batch.env_obs = [step.raw_obs[i][agents[j]] for i, j in zip(e, s, strict=True)]
            else:
                flat = _seen(g, step.groups[g.spec.id].obs)
                batch.env_obs = [g.spec.obs_view.unflatten(flat[i, j]) for i, j in zip(e, s, strict=True)]
        action, extras = g.actor.act(batch, explore)
        view = g.spec.action_view
        if action.shape != (g.flat_actions.shape if whole else (n, *view.shape)):
            raise ValueError(
                f"policy {g.spec.id!r} returned actions of shape {action.shape}; expected "
                f"{(n, *view.shape)} for action space {g.spec.action_space}"
            )
        env_action = view.to_env_batch(action, squashed) if view.has_box else action
        if whole:
            g.flat_actions[...] = env_action
        else:
            g.actions[e, s] = env_action
        if g.book is not None:
            g.book.start(e, s, obs, action, mask, extras, first,
                         None if step.state is None else self.ticks)

    def _close(self, step: VecStep, ended_agents: np.ndarray | None, ends: bool,
               dropped: np.ndarray | None) -> dict[str, list[Transitions]]:
        """Book rewards and close the transitions of agents whose episode ended.

        ``ended_agents`` is None when no agent's episode ended. Returns a list of closed
        batches for each collecting policy.
        """
        if not self._reward_screen(step.reward):
            e, i = np.argwhere(~np.isfinite(step.reward))[0]
            agent = self.env.agents[i]
            owner = next((g.spec.id for g in self.groups if agent in g.spec.agents), None)
            raise NonFiniteError(
                f"reward of agent {agent!r} (policy {owner!r}) in env copy {e} is "
                f"{step.reward[e, i]} at env step {self.env_steps}; nothing was learned from it"
            )
        if dropped is not None:  # an env copy raised: its partial episode goes, unbooked
            self._abandon(dropped)
        elif ended_agents is None and not ends and not self._closing:
            return {}  # nothing ended, and no group books transitions or stacks frames
        any_ended = ended_agents is not None and np.count_nonzero(ended_agents) > 0
        closed: dict[str, list[Transitions]] = {}
        for g in self.groups:
            blocks = step.groups[g.spec.id]
            ended = None
            if any_ended:
                ended = blocks.terminated | blocks.truncated
                g.freshen(ended)
            if ends:
                g.freshen(step.episode_end)
            book, stack = g.book, g.stack
            if book is None and stack is None:
                continue
            if book is not None:
                closed[g.spec.id] = []
                book.add_rewards(blocks.reward)
            if ended is not None and np.count_nonzero(ended):
                final = _seen(g, blocks.final_obs)
                self._check_finite(g, np.where(ended[..., None], final, 0.0), "final observation")
                view = stack.push(ended, final) if stack is not None else final
                if book is not None:
                    fmask = None if g.mask is None else blocks.final_mask
                    t = book.close(ended, view, fmask, blocks.terminated, blocks.truncated,
                                   self.steps)
                    if t is not None:
                        if step.final_state is not None:
                            self._attach_states(t, step.final_state, final=True)
                        closed[g.spec.id].append(t)
                if stack is not None:
                    stack.clear(ended)
            if ends:
                if book is not None:
                    book.forget_pending(step.episode_end)
                if stack is not None:
                    stack.clear(step.episode_end)
        return closed

    def _observe(self, step: VecStep, closed: dict[str, list[Transitions]] | None = None) -> None:
        """Take in the observations of the agents that act next; close their last transitions."""
        groups = step.groups
        for g in self.groups:
            blocks = groups[g.spec.id]
            # (as _acting and _seen give them, without their calls: this runs every step)
            acts = g.acts = blocks.acting if g.live is None else blocks.acting & g.live
            if g.leaves and step.obs_left and not step.left_unsure:  # nobody reads them
                g.obs = blocks.obs
            else:
                if g.leaves and step.obs_left:  # some written after all: fill in, check all
                    self.env.fill_obs()  # type: ignore[attr-defined]  # as told (skip_obs)
                obs = blocks.obs if g.spec.prep is None else g.spec.prep(blocks.obs)
                if not g.screen(obs):
                    self._check_finite(g, obs, "observation")
                g.obs = g.stack.push(acts, obs) if g.stack is not None else obs
            g.mask = blocks.mask
            if closed is not None and g.book is not None:
                t = g.book.close(acts, g.obs, g.mask, g.never, g.never, self.steps)
                if t is not None:
                    if step.state is not None:
                        self._attach_states(t, step.state, final=False)
                    closed[g.spec.id].append(t)

    def _tick(self, step: VecStep) -> None:
        """A new global state of every copy is seen (after a reset or a step)."""
        if step.state is not None:
            self.ticks += 1
            self._seen[self.ticks] = step.state.copy()  # the env writes the next into the same

    def _forget_states(self) -> None:
        """Keep only the states seen now and those that open transitions acted in."""
        if len(self._seen) <= 1:  # no state, or only the one seen now
            return
        keep = {self.ticks}
        for g in self.groups:
            b = g.book
            if b is not None and b.at is not None and b.open.any():
                keep.update(np.unique(b.at[b.open]).tolist())
        for tick in [t for t in self._seen if t not in keep]:
            del self._seen[tick]

    def _attach_states(self, t: Transitions, after: np.ndarray, final: bool) -> None:
        """Give closed rows ``t`` (whose ``state`` holds the tick each agent acted at) the
        env's global state then and after (``after``, ``[E, state_dim]``, seen now): each
        (tick, copy) once, however many of its agents' rows name it."""
        E = self.env.num_envs
        assert t.state is not None
        ids, row = np.unique(t.state * E + t.env, return_inverse=True)
        ticks, copies = np.divmod(ids, E)
        before = np.empty((len(ids), after.shape[1]), np.float32)
        for tick in np.unique(ticks).tolist():
            at = ticks == tick
            before[at] = self._seen[tick][copies[at]]
        now, next_row = np.unique(t.env, return_inverse=True)
        t.states = np.concatenate([before, after[now]])
        t.state_keys = np.concatenate([
            np.stack([2 * ticks, copies], axis=1),
            np.stack([np.full(len(now), 2 * self.ticks + final), now], axis=1)]).astype(np.int64)
        t.state, t.next_state = row, len(ids) + next_row

    def _abandon(self, copies: np.ndarray) -> None:
        """Forget the open and held transitions and stacked frames of ``copies`` ([E] bool)."""
        for hold in (self.holds or {}).values():
            hold.discard(copies)
        for g in self.groups:
            g.freshen(copies)
            if g.book is not None:
                g.book.discard(copies)
            if g.stack is not None:
                g.stack.clear(copies)

    def _check_finite(self, g: _Group, obs: np.ndarray, what: str) -> None:
        if _finite(obs):
            return
        e, j = np.argwhere(~np.isfinite(obs).all(axis=2))[0]
        raise NonFiniteError(
            f"{what} of agent {g.spec.agents[j]!r} (policy {g.spec.id!r}) in env copy {e} "
            f"holds NaN or inf at env step {self.env_steps}"
        )

    def _episodes(self, step: VecStep, stepped: np.ndarray, ended_agents: np.ndarray | None,
                  ends: bool, dropped: np.ndarray | None) -> None:
        tracker = self.tracker
        tracker.stepped(stepped, step.reward, ended_agents, stepped is self._every_copy)
        if ended_agents is not None and self.callbacks.wants_ends:
            tracker.ended(step, ended_agents, self.env.obs_views)
        if dropped is not None:
            for e in np.nonzero(dropped)[0]:
                tracker.drop(int(e))
                self._map(int(e))
                self.callbacks.on_episode_start(
                    episode=tracker.current[e], env_index=int(e), runner=self)
        if self.callbacks.wants_steps:
            for e in np.nonzero(stepped)[0]:
                episode = tracker.current[e]
                episode.length = tracker.length_of(int(e))
                self.callbacks.on_episode_step(episode=episode, env_index=int(e), runner=self)
        if not ends:
            return
        for e in np.flatnonzero(step.episode_end).tolist():
            ep = tracker.finish(e)
            self._map(e)
            self.episodes += 1
            self.callbacks.on_episode_end(episode=ep, env_index=e, runner=self)
            self.window.add(ep)
            self.callbacks.on_episode_start(episode=tracker.current[e], env_index=e, runner=self)

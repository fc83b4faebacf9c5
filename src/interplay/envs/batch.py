"""The batched step contract every vector env returns, and the buffers behind it.

Agents are columns in the fixed order of ``agents`` (the env's ``possible_agents``); copies are
rows. A copy's step that ends its episode carries the final observations in ``final_obs`` and the
flags in ``terminated``/``truncated``, while ``obs``/``acting`` already belong to the next episode.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from gymnasium import spaces

from interplay.envs.adapters import CopyStep, EnvContractError
from interplay.envs.groups import GroupBlocks, GroupStep
from interplay.envs.spaces import (
    MASK_KEY,
    ActionView,
    ObservationError,
    ObsView,
    action_view,
    batch_rows,
    fits_as_is,
    obs_view,
    observation_error,
)


@dataclass(slots=True)
class VecStep:
    obs: dict[str, np.ndarray]  # agent -> [E, obs_dim] float32; meaningful where acting
    mask: dict[str, np.ndarray | None]  # agent -> [E, mask_dim] bool legal actions, or None
    acting: np.ndarray  # [E, A] bool: the agent must act now
    reward: np.ndarray  # [E, A] float64: reward each agent received from the step just taken
    terminated: np.ndarray  # [E, A] bool: the agent's episode ended in that step
    truncated: np.ndarray  # [E, A] bool
    final_obs: dict[str, np.ndarray]  # agent -> [E, obs_dim]; meaningful where it ended
    final_mask: dict[str, np.ndarray | None]
    episode_end: np.ndarray  # [E] bool: that copy's episode ended and it was reset
    raw_obs: list[dict[str, Any]] | None = None  # per copy, the env's own observations
    infos: list[dict[str, dict]] | None = None
    # Per copy, the info each agent that finished in this step got with it (read it only for
    # agents ``terminated``/``truncated`` now: other entries are left from earlier steps).
    final_infos: list[dict[str, dict]] | None = None
    dropped: np.ndarray | None = None  # [E] bool: episode abandoned (env raised); obs are a new one
    # False promises that terminated, truncated, episode_end and dropped are all clear, so
    # readers may skip looking; True means they may hold something.
    flagged: bool = True
    # True promises that every row of ``mask`` is all True (no action is illegal anywhere), so
    # readers may skip it; False means some row may hold a False.
    all_legal: bool = False
    # True promises that ``acting`` is all True (every agent of every copy acts now).
    all_acting: bool = False
    # A number that changes whenever ``acting`` does (who acts stays the same while it does not),
    # so that readers may keep what they work out from it; None where the env cannot tell.
    acting_version: int | None = None
    # Where some observations were asked to be skipped (VecEnv ``skip_obs``): ``obs_left``
    # says some were left unwritten in this step (known sound: see ``StepBuffers.skip_obs``),
    # ``left_unsure`` that others of theirs were written after all, unchecked (then whoever
    # skipped them should have the rest filled in and check them all).
    obs_left: bool = False
    left_unsure: bool = False
    # The env's global state (its ``state()``), kept only when asked for (a QMIX mixer reads
    # it): ``[E, S]`` float32 per copy now (after a reset, the new episode's), and in
    # ``final_state`` the state right after the step of copies where some agent's episode
    # ended in that step (read it only there).
    state: np.ndarray | None = None
    final_state: np.ndarray | None = None
    # Per policy group, once the env was told the groups (``VecEnv.group``): its share of the
    # arrays above as ``[E, k, ...]`` blocks in its slot order (see ``groups.GroupStep``).
    groups: dict[str, GroupStep] = field(default_factory=dict)


class VecEnv(Protocol):
    agents: list[str]
    num_envs: int
    obs_views: dict[str, ObsView]
    action_views: dict[str, ActionView]
    observation_spaces: dict[str, spaces.Space]
    action_spaces: dict[str, spaces.Space]
    turn_based: bool  # one agent moves per step (a PettingZoo AEC env)
    snapshot_supported: bool  # a checkpoint can hold its copies (an exact resume)
    kept_state: spaces.Space | None  # the env's global state's space, kept per step; or None

    def reset(self, seed: int | None) -> VecStep: ...

    def step(self, actions: dict[str, np.ndarray]) -> VecStep: ...

    def current_step(self) -> VecStep: ...

    def stats(self) -> Mapping[str, float]:
        """What train rows carry of it (faults survived); nothing by default."""
        ...

    def restored(self) -> None:
        """Rebuild what it derives from its data, after a snapshot was put back."""
        ...

    def group(self, groups: dict[str, tuple[str, ...]]) -> None:
        """From now on, hand each group's agents (policy id -> agents in slot order) as
        ``[E, k, ...]`` blocks in ``VecStep.groups``."""
        ...

    def close(self) -> None: ...


Alloc = Callable[[tuple[int, ...], Any, Any], np.ndarray]  # np.full's (shape, fill, dtype)


class StepBuffers:
    """Preallocated arrays that copies write their steps into.

    ``alloc`` makes each array (``np.full`` by default); the async vector env passes one that
    carves the arrays out of shared memory, in the same order in every process.
    """

    def __init__(self, agents: list[str], obs_views: dict[str, ObsView],
                 action_views: dict[str, ActionView], num_envs: int, alloc: Alloc = np.full,
                 keep_raw: bool = True, state_dim: int = 0):
        E, A = num_envs, len(agents)
        self.agents = agents
        self.col = {a: i for i, a in enumerate(agents)}
        self.obs_views = obs_views
        self.action_views = action_views
        self.num_envs = E
        # Agents whose actions go to the env as they are (Discrete from 0).
        self._as_is = frozenset(a for a, v in action_views.items()
                                if v.kind == "discrete" and not v.start)
        dims = {a: obs_views[a].dim for a in agents}
        mask_dims = {a: action_views[a].mask_dim for a in agents}
        dtypes = {a: obs_views[a].dtype for a in agents}
        self.obs = agent_blocks(dims, E, dtypes, alloc=alloc)
        self.final_obs = agent_blocks(dims, E, dtypes, alloc=alloc)
        self.mask = agent_blocks(mask_dims, E, bool, fill=True, alloc=alloc)
        self.final_mask = agent_blocks(mask_dims, E, bool, fill=True, alloc=alloc)
        self.acting = alloc((E, A), False, bool)
        self.reward = alloc((E, A), 0.0, np.float64)
        self.terminated = alloc((E, A), False, bool)
        self.truncated = alloc((E, A), False, bool)
        self.episode_end = alloc((E,), False, bool)
        self.dropped = alloc((E,), False, bool)
        # The env's global state, when ``state_dim`` asks for it (see VecStep.state).
        self.state_dim = state_dim
        self.state = alloc((E, state_dim), 0.0, np.float32) if state_dim else None
        self.final_state = alloc((E, state_dim), 0.0, np.float32) if state_dim else None
        # The env's own observations and infos are kept only when ``keep_raw`` (a scripted
        # policy reads them); otherwise nothing of the env's step outlives the writing.
        self.keep_raw = keep_raw
        self.raw_obs: list[dict[str, Any]] = [{} for _ in range(E)]
        self.infos: list[dict[str, dict]] = [{} for _ in range(E)]
        # The infos of agents that finished (always kept: episode ends are rare), and the
        # copies where some agent finished since the last clear_step.
        self.final_infos: list[dict[str, dict]] = [{} for _ in range(E)]
        self.ended: list[int] = []
        # Who acts next, per copy; None until a copy is first written here.
        self.movers: list[tuple[str, ...] | None] = [None] * E
        # What is derived from the agents and the arrays (each copy's plan for its movers,
        # plans kept by order, layouts): rebuilt or still valid after a snapshot is put back.
        self._derived = _Derived(E, (_Layout(self, self.obs, keyed=True),
                                     _Layout(self, self.final_obs, keyed=False)))
        self._flagged = True  # a flag may be set since the last clear_step
        # Rows whose legal-action mask may not be all True (in this process), per agent;
        # agents without masks have none.
        self._masked = {a: [self.mask[a] is not None] * E for a in agents}
        self._mask_rows = E * sum(self.mask[a] is not None for a in agents)  # all masked
        # Per agent, what writing its observation needs: column, view, rows, mask rows, masked.
        self._slots = {a: (self.col[a], obs_views[a], obs_views[a].shaped(self.obs[a]),
                           self.mask[a], self._masked[a]) for a in agents}
        self.agent_order = tuple(agents)
        self.recount()
        self._groups: GroupBlocks | None = None
        self._view = VecStep(
            obs=self.obs, mask=self.mask, acting=self.acting, reward=self.reward,
            terminated=self.terminated, truncated=self.truncated, final_obs=self.final_obs,
            final_mask=self.final_mask, episode_end=self.episode_end,
            raw_obs=self.raw_obs if keep_raw else None, infos=self.infos if keep_raw else None,
            final_infos=self.final_infos, dropped=self.dropped, state=self.state,
            final_state=self.final_state,
        )

    def env_actions(self, actions: dict[str, np.ndarray], rows: slice) -> dict[str, np.ndarray]:
        """Each agent's actions for copies ``rows`` as the env takes them (row i: copy rows[i])."""
        if rows.start != 0 or rows.stop != self.num_envs:
            actions = {a: x[rows] for a, x in actions.items()}
        elif self._as_is.issuperset(actions):
            return actions
        views = self.action_views
        return {a: x if a in self._as_is else views[a].to_env(x) for a, x in actions.items()}

    def whole_actions(self, actions: dict[str, np.ndarray], rows: slice) -> np.ndarray | None:
        """``[len(rows), A, *shape]`` actions of every agent in env order as the env takes them,
        when ``actions`` is an :class:`ActionBlocks` whose blocks, side by side, hold them all,
        each block's agents with one action space and every block's actions of one shape and
        dtype once the env's (Discrete counted from the space's start, MultiDiscrete and Box
        in the space's dtype): converted once per block, not once per agent. None otherwise. A
        copy's moves are then ``dict(zip(movers, row))`` (``row[mover_cols(e)]`` where only
        some agents move)."""
        blocks: list[tuple[tuple[str, ...], np.ndarray]] | None = getattr(
            actions, "blocks", None)
        d = self._derived
        if blocks is d.whole_blocks and rows is d.whole_rows and blocks:  # as last time
            return d.whole_view
        if not blocks:
            return None
        if blocks is not d.whole_blocks:
            d.whole_blocks, d.whole_rows = blocks, None
            d.whole_views = self._block_views(blocks)
        views = d.whole_views
        if views is None:
            return None
        if not views:  # every action goes to the env as it is
            whole = blocks[0][1] if len(blocks) == 1 else getattr(actions, "whole", None)
            if whole is not None:  # a view of the one array, the same while the blocks are
                if rows != d.whole_rows:
                    d.whole_rows, d.whole_view = rows, whole[rows]
                return d.whole_view
            return np.concatenate([block[rows] for _, block in blocks], axis=1)
        out = [view.to_env(block[rows]) for view, (_, block) in zip(views, blocks, strict=True)]
        return out[0] if len(out) == 1 else np.concatenate(out, axis=1)

    def _block_views(self, blocks: list[tuple[tuple[str, ...], np.ndarray]]
                     ) -> list[ActionView] | None:
        """How :meth:`whole_actions` hands over ``blocks``: ``[]`` when every action goes to
        the env as it is, each block's one action view when they must be converted, None when
        they cannot be read as one array (not in env order, agents of a block with different
        spaces, composite actions, or shapes or dtypes that differ once converted)."""
        agents = tuple(a for group, _ in blocks for a in group)
        if agents != self.agent_order:
            return None
        if self._as_is.issuperset(agents):
            return [] if all(block.ndim == 2 for _, block in blocks) else None
        views = [self.action_views[group[0]] for group, _ in blocks]
        if any(v.kind == "composite" or any(self.action_views[a] != v for a in group)
               or block.shape[2:] != v.shape
               for v, (group, block) in zip(views, blocks, strict=True)):
            return None
        if len({(v.shape, np.dtype(v.space.dtype)) for v in views}) != 1:
            return None
        return views

    def recount(self) -> None:
        """Count the True entries of ``acting`` and the masked rows behind ``all_acting`` and
        ``all_legal`` (:meth:`write_acting` keeps the counts; a snapshot put back may not)."""
        self._n_acting = int(np.count_nonzero(self.acting))
        self._n_masked = sum(map(sum, self._masked.values()))
        self._derived.of = [None if m is None else self._plan(m) for m in self.movers]
        if self._derived.acting_version is not None:  # the rows may hold another step's
            self._derived.acting_version += 1

    def cols_of(self, agents: tuple[str, ...]) -> np.ndarray:
        """The columns of ``agents`` (one shared array for every agent in env order)."""
        if agents == self.agent_order:
            return self._derived.in_order
        return np.fromiter(map(self.col.__getitem__, agents), np.intp, len(agents))

    def mover_cols(self, e: int) -> np.ndarray:
        """The columns (of ``reward``, say) of copy ``e``'s movers, in their order."""
        plan = self._derived.of[e]
        assert plan is not None, f"copy {e} has had no movers yet"
        return plan.cols

    def _plan(self, movers: tuple[str, ...]) -> _Plan:
        """How to write this order of movers (worked out once while it is kept)."""
        plans = self._derived.plans
        plan = plans.get(movers)
        if plan is None:
            plan = _kept(plans, movers, _Plan(movers, self, self._derived.layouts[0]))
        return plan

    def no_outcome(self, e: int) -> None:
        """Copy ``e`` took no step, or its step failed: nobody was paid."""
        self.reward[e] = 0.0

    def clear_step(self, rows: slice = slice(None), rewards: bool = True) -> None:
        """Clear the rewards (unless ``rewards`` is False) and flags of copies ``rows``."""
        if rewards:
            self.reward[rows] = 0.0
        self._derived.unsure = False
        if not self._flagged:  # flags are rare (episode ends, failures); most steps skip this
            return
        self.terminated[rows] = False
        self.truncated[rows] = False
        self.episode_end[rows] = False
        self.dropped[rows] = False
        self.ended.clear()
        self._flagged = False

    def flag(self, flags: np.ndarray, e: int) -> None:
        """Set copy ``e``'s ``flags`` (``episode_end`` or ``dropped``); :meth:`clear_step` clears it."""
        self._flagged = True
        flags[e] = True

    def write_acting(self, e: int, cs: CopyStep) -> None:
        """Write copy ``e``'s observations and masks of the agents that act next.

        Agents that sit side by side in one block, in the order the env hands them over, are
        written with one stacked write and checked once for the block; only when that fails
        (or for Dict observations) is each agent written and checked on its own, so the
        error names the agent and its space.
        """
        acting, infos, obs = self.acting, cs.infos, cs.obs
        movers = cs.movers
        if movers is not None and movers is self.movers[e]:  # as before, at a glance
            plan = self._derived.of[e]
            assert plan is not None  # a copy with movers has their plan
        else:
            movers = tuple(obs) if movers is None else movers
            plan = self._plan(movers)
            if movers != self.movers[e]:  # who acts changed: rewrite the row
                acting[e] = False
                acting[e, plan.cols] = True
                self._n_acting += len(movers) - len(self.movers[e] or ())
                self._derived.acting_version = (self._derived.acting_version or 0) + 1
            self.movers[e] = movers
            self._derived.of[e] = plan
        if self.keep_raw:
            self.raw_obs[e] = obs
            self.infos[e] = infos
        d = self._derived
        run = plan.whole
        # The common case at once: no masks to write (none given, none held from before)
        if run is not None and not d.any_left and not (
                plan.runs_masked and (self._n_masked or any(infos.values()))):
            # (an env that hands out rows of its own arrays may have them left, see below)
            skip = bool(d.skipped) and id(run.block) in d.skipped
            if not skip or plan.cuts[run.first] == _NOT_ROWS:
                values = list(obs.values())
                if not _write_run(run.block, e, run.where, values, run.shape, run.dtype):
                    self._put_run(e, movers, run, values)  # one by one, naming what is wrong
                d.unsure |= skip
                return
        if plan.runs:
            values = list(obs.values())
            left: list[tuple[_Run, Sequence[Any]]] | None = None
            for run in plan.runs:
                part = values if run.size == len(values) else run.pick(values)
                # Nobody reads them: left unwritten where they are rows of the env's own
                # arrays, of the right shape and all finite, so that nothing is lost by not
                # looking at them row by row; otherwise written, for the reader to check.
                skip = bool(d.skipped) and id(run.block) in d.skipped
                if skip and _sound(part, run.shape, run.dtype, plan.cuts[run.first]):
                    if left is None:
                        left = []
                    left.append((run, part))
                else:
                    self._put_run(e, movers, run, part)
                    d.unsure |= skip
            d.left[e] = None if left is None else (movers, left)
            d.any_left |= left is not None
            # Masks: none to read when no agent got an info, and none to clear when every
            # row is known all-legal already.
            if plan.runs_masked and (self._n_masked or any(infos.values())) and not (
                    self._n_masked == self._mask_rows and self._put_masks(e, plan, obs, infos)):
                for a in plan.run_masked():
                    self._write_mask(e, a, obs[a], infos.get(a))
        elif d.any_left:
            d.left[e] = None
        if plan.alone and d.skipped:  # written, and not screened by a reader that skips
            d.unsure = True
        for a in plan.alone:
            o = obs[a]
            self._write_obs(e, a, o)
            if self.mask[a] is not None:
                self._write_mask(e, a, o, infos.get(a))

    def _put_masks(self, e: int, plan: _Plan, obs: dict[str, Any], infos: dict[str, Any]) -> bool:
        """Write the masks the runs' agents got (in their observations or in their infos, all
        in one of those) with one write, when each got one, every one of them fits the action
        space, and they sit in one block (only called while every mask row is marked masked
        already: nothing to count); False otherwise (then they are written one by one, which
        names what does not fit)."""
        at = plan.run_mask_block()
        if at is None or plan.masks_in_obs is None:
            return False
        agents, block, cols = at
        try:
            given = operator.itemgetter(*agents)(obs if plan.masks_in_obs else infos)
            masks = list(map(_GET_MASK, given))
            # Envs often hand every agent the same array: one row, checked once.
            arr = np.asarray(masks[0] if _all_is(masks, masks[0]) else masks)
        except (KeyError, TypeError, ValueError, IndexError):  # no mask, or ragged masks
            return False
        if (arr.shape[-1:] != (block.shape[2],) or arr.ndim > 2 or arr.ndim == 2
                and len(arr) != len(agents) or arr.dtype.kind not in "biuf"):
            return False
        block[e, cols] = arr.astype(bool, copy=False)
        return True

    def _put_run(self, e: int, movers: tuple[str, ...], run: _Run, part: Sequence[Any]) -> None:
        """Write one run of a plan (see :class:`_Plan`): stacked, or agent by agent when that
        fails, so that the error names the agent."""
        # the observations beside their masks, each in a Dict, taken out
        inner = _inner_obs(part) if run.keyed else part
        if inner is None or not _write_run(run.block, e, run.where, inner, run.shape, run.dtype):
            for a, o in zip(run.pick(movers), part, strict=True):
                self._write_obs(e, a, o)

    def skip_obs(self, agents: frozenset[str]) -> frozenset[str]:
        """In the next writes (until this is called again), leave unwritten the observation
        blocks that hold only ``agents``: nobody reads them. Only runs of observations known
        sound at a glance (see :func:`_sound`) are left; the others are written, and the step
        says so (``VecStep.left_unsure``). What is left is written when :meth:`fill_obs` is
        called; the next write of a copy drops it. Returns the agents of those blocks (those
        whose observations may be left: not those sharing a block with an agent read)."""
        members: dict[int, list[str]] = {}
        for a, (block, _j) in self.obs.place.items():
            members.setdefault(id(block), []).append(a)
        skipped = {b: held for b, held in members.items() if agents.issuperset(held)}
        self._derived.skipped = frozenset(skipped)
        return frozenset(a for held in skipped.values() for a in held)

    def fill_obs(self) -> None:
        """Write the observations that :meth:`skip_obs` left unwritten."""
        d = self._derived
        if not d.any_left:
            return
        for e, left in enumerate(d.left):
            if left is not None:
                d.left[e] = None
                movers, runs = left
                try:
                    for run, part in runs:
                        self._put_run(e, movers, run, part)
                except ObservationError as err:
                    raise ObservationError(f"env copy {e}, the latest step: {err}") from None
        d.any_left = False
        if self._groups is not None:
            self._groups.refresh(False)

    def _write_obs(self, e: int, a: str, o: Any) -> None:
        _col, view, rows, _masks, _masked = self._slots[a]
        try:
            if view.plain and fits_as_is(o, view.shape, view.dtype):
                rows[e] = o
            else:  # checks the shape on the way
                view.flatten(o, rows[e])
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
            raise observation_error(a, view.space, o, err) from None

    def _write_mask(self, e: int, a: str, o: Any, info: dict | None) -> None:
        _col, view, _rows, masks, masked = self._slots[a]
        row = self._mask_row(a, o, info) if view.has_mask_key or info else None
        if row is not None:
            masks[e] = row
            if not masked[e]:
                masked[e] = True
                self._n_masked += 1
        elif masked[e]:  # all legal: written only when the row may hold something else
            masks[e] = True
            masked[e] = False
            self._n_masked -= 1

    def write_outcome(self, e: int, cs: CopyStep) -> None:
        """Write copy ``e``'s rewards and flags from one step (after :meth:`clear_step`).

        The rewards need not have been cleared: an agent the step paid nothing gets 0 here.
        Rewards in an order seen before are written with one write; a reward that is not a
        number is named with its agent.
        """
        reward, rewards = self.reward, cs.rewards
        n = len(rewards)
        if n < _FEW:  # a few agents: one by one is quicker than one indexed write
            if n != len(self.col):
                reward[e] = 0.0
            self._write_rewards(e, rewards)
        else:
            self._write_reward_row(e, rewards, self.mover_cols(e)
                                   if cs.reward_order is not None
                                   and cs.reward_order is self.movers[e] else None)
        if not (cs.terminated or cs.truncated):
            return
        self._flagged = True
        self.final_infos[e] = cs.final_infos
        self.ended.append(e)
        col = self.col
        for flags, ended in ((self.terminated, cs.terminated), (self.truncated, cs.truncated)):
            if not ended:
                continue
            done = self._write_final_runs(e, ended, flags)
            if len(done) == len(ended):  # every one written with its run
                continue
            for a, o in ended.items():
                if a in done:  # written with its run, flags and masks too
                    continue
                flags[e, col[a]] = True
                masks = self.final_mask[a]
                if o is None:  # the env gave none: the last one is still in the acting rows
                    self.final_obs[a][e] = self.obs[a][e]
                    if masks is not None:
                        masks[e] = self.mask[a][e]
                    continue
                try:
                    self.obs_views[a].write(o, self.final_obs[a], e)
                except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
                    raise observation_error(a, self.obs_views[a].space, o, err) from None
                if masks is not None:
                    row = self._mask_row(a, o, None)
                    masks[e] = True if row is None else row

    def _write_reward_row(self, e: int, rewards: dict[str, Any],
                          cols: np.ndarray | None = None) -> None:
        """Copy ``e``'s rewards with one write, into columns ``cols`` when known (their
        order's columns are worked out once)."""
        reward = self.reward
        if cols is None:
            order = tuple(rewards)
            cols = self._derived.reward_cols.get(order)
            if cols is None:
                cols = _kept(self._derived.reward_cols, order, self.cols_of(order))
        if len(rewards) != len(self.col):
            reward[e] = 0.0
        try:
            values = np.fromiter(rewards.values(), np.float64, len(cols))
            if cols is self._derived.in_order:
                reward[e] = values
            else:
                reward[e, cols] = values
        except (TypeError, ValueError):
            self._write_rewards(e, rewards)

    def _write_rewards(self, e: int, rewards: dict[str, Any]) -> None:
        """Copy ``e``'s rewards one by one, naming a reward that is not a number."""
        reward, col = self.reward, self.col
        for a, r in rewards.items():
            try:
                reward[e, col[a]] = r
            except (TypeError, ValueError) as err:
                raise EnvContractError(
                    f"reward of agent {a!r} is {r!r}; rewards must be numbers ({err})") from None

    def _write_final_runs(self, e: int, ended: dict[str, Any],
                          flags: np.ndarray) -> frozenset[str] | tuple[()]:
        """Write the final observations of ``ended`` that sit side by side in a block with one
        stacked write each (as :meth:`write_acting` does), with their ``flags`` and their final
        masks (all legal: such agents' observations hold no mask, and a final info is not read
        for one); the agents written that way."""
        if len(ended) < _FEW:  # a few agents: one by one is as quick
            return ()
        order = tuple(ended)
        plans = self._derived.final_plans
        plan = plans.get(order)
        if plan is None:
            plan = _kept(plans, order, _Plan(order, self, self._derived.layouts[1]))
        values = list(ended.values())
        done: list[str] = []
        for run, masks in zip(plan.runs, plan.run_final_masks(), strict=True):
            part = run.pick(values)
            if not any(o is None for o in part) and _write_run(
                    run.block, e, run.where, part, run.shape, run.dtype):
                flags[e, plan.cols[run.members]] = True
                for mask_block, at in masks:
                    mask_block[e, at] = True
                done.extend(run.pick(order))
        return frozenset(done)

    def _mask_row(self, agent: str, obs: Any, info: dict | None) -> np.ndarray | None:
        """The legal actions the env gave with ``obs``, or None when it gave none (all legal)."""
        view = self.obs_views[agent]
        if view.has_mask_key:
            try:
                source = obs[MASK_KEY]
            except (KeyError, TypeError, IndexError):
                raise observation_error(agent, view.space, obs,
                                        ValueError("it holds no action_mask")) from None
        else:
            source = info.get(MASK_KEY) if info else None
        if source is None:
            return None
        try:
            return self.action_views[agent].legal(source)
        except ValueError as err:
            raise ObservationError(f"agent {agent!r}: {err}") from None

    def group(self, groups: dict[str, tuple[str, ...]]) -> None:
        """Hand these groups' blocks in every step from now on (see ``VecEnv.group``)."""
        self._groups = group_blocks(self._view, self.agents, self._groups, groups)

    def view(self) -> VecStep:
        """The buffers as a step; the same object every time, holding the latest step."""
        self._view.flagged = self._flagged
        self._view.all_legal = not self._n_masked
        self._view.all_acting = self._n_acting == self.acting.size
        self._view.acting_version = self._derived.acting_version
        self._view.obs_left = self._derived.any_left
        self._view.left_unsure = self._derived.unsure
        if self._groups is not None and not self._groups.views:
            self._groups.refresh(self._flagged)
        return self._view


class _Derived:
    """What the buffers derive from their agents and arrays: each copy's :class:`_Plan` for its
    movers, the plans (and reward columns) kept by order, the layouts they are worked out
    from, the shared columns of every agent in env order, and the whole-actions view.
    Slotted, so that an env snapshot's walk passes it by: none of it is the env's state, its
    arrays are shared between plans (a walk would refill them in place), and ``recount()``
    gives each copy its plan again after a restore."""

    __slots__ = ("of", "plans", "final_plans", "reward_cols", "layouts", "in_order",
                 "whole_blocks", "whole_views", "whole_rows", "whole_view", "skipped", "left",
                 "any_left", "unsure", "acting_version")

    def __init__(self, num_envs: int, layouts: tuple[_Layout, _Layout]):
        self.of: list[_Plan | None] = [None] * num_envs
        self.plans: dict[tuple[str, ...], _Plan] = {}
        self.final_plans: dict[tuple[str, ...], _Plan] = {}
        self.reward_cols: dict[tuple[str, ...], np.ndarray] = {}
        self.layouts = layouts  # for the acting rows and for the final ones
        self.in_order = np.arange(len(layouts[0].kind), dtype=np.intp)
        self.in_order.flags.writeable = False
        self.whole_blocks: list[tuple[tuple[str, ...], np.ndarray]] | None = None
        # the blocks' action views (see StepBuffers._block_views)
        self.whole_views: list[ActionView] | None = None
        self.whole_rows: slice | None = None
        self.whole_view: np.ndarray | None = None
        # Observations nobody reads (see StepBuffers.skip_obs): the ids of the blocks that
        # hold only theirs, and per copy what its last write left unwritten.
        self.skipped: frozenset[int] = frozenset()
        self.left: list[tuple[tuple[str, ...], list[tuple[_Run, Sequence[Any]]]] | None] = (
            [None] * num_envs)
        self.any_left = False
        # Some observations of skipped blocks were written after all since the last
        # clear_step (VecStep.left_unsure): whoever skipped them must fill and check them.
        self.unsure = False
        # Counts rewrites of ``acting`` here (VecStep.acting_version); None while this process
        # has written none (an async env's own buffers: its workers write them).
        self.acting_version: int | None = None


class _Layout:
    """Where each agent's observation rows sit in one set of arrays (``obs`` or ``final_obs``),
    as arrays over agents, so that a plan for any order of movers is worked out with a few
    array operations: the class of its block and shape, or of its block and space where
    many are flattened at once (``ObsView.batched``), and its column there (-1: written
    alone: an observation with image entries, one with no block, or, unless ``keyed``, a Box
    beside an action_mask)."""

    def __init__(self, buf: StepBuffers, arrays: FixedArrays, keyed: bool):
        A = len(buf.agents)
        self.kind = np.full(A, -1, np.intp)
        self.slot = np.zeros(A, np.intp)
        # (block, a Box's shape or a batched space, the rows' dtype or None for a space)
        self.classes: list[tuple[np.ndarray, Any, Any]] = []
        self.keyed: list[bool] = []  # per class: a Box beside an action_mask, in a Dict
        known: dict[tuple[int, Any, bool], int] = {}
        batched: list[spaces.Space] = []  # the batched spaces met, one of each
        for i, a in enumerate(buf.agents):
            view = buf.obs_views[a]
            if a not in arrays.place or not (view.plain and (keyed or not view.has_mask_key)
                                             or view.batched):
                continue
            block, j = arrays.place[a]
            # A Box's rows: its shape and their dtype; others: their space (dtype None).
            shape: Any = view.shape
            dtype: Any = view.dtype
            key: tuple[int, Any, bool] = (id(block), shape, view.has_mask_key)
            if not view.plain:
                same = next((k for k, sp in enumerate(batched) if sp == view.space), None)
                if same is None:
                    same = len(batched)
                    batched.append(view.space)
                shape, dtype, key = batched[same], None, (id(block), same, False)
            if key not in known:
                known[key] = len(self.classes)
                self.classes.append((block, shape, dtype))
                self.keyed.append(view.has_mask_key)
            self.kind[i], self.slot[i] = known[key], j
        self.has_mask = np.array([buf.mask[a] is not None for a in buf.agents], bool)


class _Run:
    """Movers of one order whose observations are written together: their rows sit in one
    block with the same plain (Box) observation shape, or the same space flattened a leaf at
    a time (``ObsView.batched``).

    ``members`` are their places in the movers' order (a slice where they sit side by side
    there, else an index array: agents of other blocks between them) and ``pick`` takes
    theirs out of a sequence in that order; ``where`` is where their rows sit in ``block``
    (a slice; pieces ``(k0, k1, slice)``: members ``k0:k1`` in a slice; or, broken by many
    gaps, its columns); ``keyed``: each is a Dict holding its observation beside its
    action_mask. ``first`` is the place of the first of them.
    """

    __slots__ = ("members", "pick", "block", "where", "shape", "dtype", "keyed", "first", "size")

    def __init__(self, members: slice | np.ndarray, block: np.ndarray,
                 where: slice | list[tuple[int, int, slice]] | np.ndarray,
                 shape: tuple, dtype: Any, keyed: bool):
        self.members, self.block, self.where = members, block, where
        self.shape, self.dtype, self.keyed = shape, dtype, keyed
        self.size = _count(members)  # how many movers
        if isinstance(members, slice):
            self.first = int(members.start)
            self.pick: Callable[[Sequence[Any]], Sequence[Any]] = operator.itemgetter(members)
        else:
            self.first = int(members[0])
            self.pick = operator.itemgetter(*members.tolist())  # at least _FEW: a tuple


def _count(members: slice | np.ndarray) -> int:
    """How many places ``members`` (a slice or an index array) holds."""
    return members.stop - members.start if isinstance(members, slice) else len(members)


class _Plan:
    """How to write one order of movers: runs (:class:`_Run`) of agents whose rows sit in one
    block with the same plain (Box) observation shape, or the same space flattened a leaf at
    a time, each written with one stacked write (into a slice of the block, or its columns
    where agents between them are missing), and the agents written alone (observations with
    image entries, final ones holding their mask, or too few of a kind)."""

    def __init__(self, movers: tuple[str, ...], buf: StepBuffers, layout: _Layout):
        self.movers, self._buf = movers, buf
        self.cols = cols = buf.cols_of(movers)
        kinds = layout.kind[cols]
        n = len(movers)
        self.runs: list[_Run] = []
        alone: list[int] = []
        cuts = [0, *(np.flatnonzero(kinds[1:] != kinds[:-1]) + 1).tolist(), n] if n else [0]
        # Side by side in the movers' order, or, where agents of other kinds lie between
        # them (two teams taking turns in the env's order), wherever they are.
        groups: dict[int, list[slice | np.ndarray]] = {}
        for i0, i1 in zip(cuts[:-1], cuts[1:], strict=True):
            groups.setdefault(int(kinds[i0]), []).append(slice(i0, i1))
        for kind, spans in groups.items():
            members: slice | np.ndarray = spans[0]
            if len(spans) > 1:
                members = np.flatnonzero(kinds == kind)
            if kind < 0 or _count(members) < _FEW:  # a few agents: one by one is as quick
                for span in spans:
                    alone.extend(range(span.start, span.stop))
                continue
            block, shape, dtype = layout.classes[kind]
            at = layout.slot[cols[members]]
            # Pieces whose columns follow one another (agents missing between them, or
            # handed over in another order, break them): each is one slice of the block.
            breaks = [0, *(np.flatnonzero(np.diff(at) != 1) + 1).tolist(), len(at)]
            if len(breaks) > _PIECES:  # broken up by many gaps: written by its columns
                where: slice | list[tuple[int, int, slice]] | np.ndarray = at
            else:
                starts = at[breaks[:-1]].tolist()
                pieces = [(k0, k1, slice(j, j + k1 - k0))
                          for k0, k1, j in zip(breaks[:-1], breaks[1:], starts, strict=True)]
                where = pieces[0][2] if len(pieces) == 1 else pieces
            self.runs.append(_Run(members, block, where, shape, dtype, layout.keyed[kind]))
        self.runs.sort(key=operator.attrgetter("first"))
        alone.sort()
        self.alone = [movers[i] for i in alone]
        # Per run (by its first mover), where its observations' arrays change (see _sound).
        self.cuts: dict[int, list[int]] = {run.first: [] for run in self.runs}
        in_runs = np.zeros(n, bool)
        for run in self.runs:
            in_runs[run.members] = True
        self._in_runs = in_runs
        self.runs_masked = bool(layout.has_mask[cols[in_runs]].any())
        # One run of plain observations, every mover in it: one stacked write
        self.whole = (self.runs[0] if len(self.runs) == 1 and not self.alone
                      and not self.runs[0].keyed and self.runs[0].size == n else None)
        # Where the runs' masks come from, when from one place: the observations (``True``),
        # the infos (``False``); None when from both.
        keyed_runs = {run.keyed for run in self.runs if layout.has_mask[cols[run.members]].any()}
        self.masks_in_obs = keyed_runs.pop() if len(keyed_runs) == 1 else None
        self._masked: list[str] | None = None
        self._mask_block: tuple[tuple[str, ...], np.ndarray, np.ndarray] | None | bool = False
        self._final_masks: list[list[tuple[np.ndarray, np.ndarray]]] | None = None

    def run_masked(self) -> list[str]:
        """The agents of the runs that have masks (worked out when first asked)."""
        if self._masked is None:
            mask = self._buf.mask
            self._masked = [a for a, inside in zip(self.movers, self._in_runs.tolist(),
                                                   strict=True)
                            if inside and mask[a] is not None]
        return self._masked

    def run_mask_block(self) -> tuple[tuple[str, ...], np.ndarray, np.ndarray] | None:
        """The agents of the runs that have masks, the one block their masks sit in and their
        columns there; None when they are few or their masks sit in more than one block."""
        if self._mask_block is False:
            agents = tuple(self.run_masked())
            place = self._buf.mask.place
            blocks = {id(place[a][0]) for a in agents}
            self._mask_block = None if len(agents) < _FEW or len(blocks) != 1 else (
                agents, place[agents[0]][0], np.array([place[a][1] for a in agents], np.intp))
        assert self._mask_block is not True
        return self._mask_block

    def run_final_masks(self) -> list[list[tuple[np.ndarray, np.ndarray]]]:
        """Per run, where its agents' final masks sit: (block, columns) per mask block."""
        if self._final_masks is None:
            place = self._buf.final_mask.place
            self._final_masks = []
            for run in self.runs:
                at: dict[int, tuple[np.ndarray, list[int]]] = {}
                for a in run.pick(self.movers):
                    if a in place:
                        block, j = place[a]
                        at.setdefault(id(block), (block, []))[1].append(j)
                self._final_masks.append([(b, np.array(js, np.intp)) for b, js in at.values()])
        return self._final_masks


_KEPT = 256  # orders of movers (or of rewards) whose plans are kept; more start afresh


def _kept(cache: dict[tuple[str, ...], Any], key: tuple[str, ...], value: Any) -> Any:
    """``value``, kept in ``cache`` under ``key``: envs whose agents come and go hand over
    ever new orders, so a full cache is emptied first (plans in use stay with their copies)."""
    if len(cache) >= _KEPT:
        cache.clear()
    cache[key] = value
    return value


def _write_run(block: np.ndarray, e: int,
               where: slice | list[tuple[int, int, slice]] | np.ndarray,
               part: Sequence[Any], shape: tuple[int, ...], dtype: Any) -> bool:
    """Write observations ``part`` into copy ``e``'s rows ``where`` of ``block`` (a slice,
    pieces of ``part`` each with its slice, or the columns of each) with one stacked write per
    slice (or one stacked copy and one indexed write), if they all have the space's ``shape``
    and a dtype the rows take as they are (see ``fits_as_is``: bytes for byte rows, any number
    type for float rows); False otherwise (then rows already written are written again, one
    by one, by the caller)."""
    n = len(part)
    if dtype is None:  # flattened a leaf of the space (``shape`` here) at a time
        rows = batch_rows(shape, part, block.shape[2])
        if rows is None:
            return False
        _place(block, e, where, rows)
        return True
    if n * block.shape[2] <= _SMALL:  # little data: one C-level conversion beats np.stack's
        try:
            arr = np.asarray(part)
        except (ValueError, TypeError):  # ragged, or not arrays at all
            return False
        if arr.shape[1:] != shape or len(arr) != n or not (
                arr.dtype.kind in "biuf" if dtype is np.float32 else arr.dtype == dtype):
            return False
        rows = arr.reshape(n, -1) if arr.ndim != 2 else arr
        if where.__class__ is slice:
            block[e, where] = rows
        else:
            _place(block, e, where, rows)
        return True
    casting = "no" if dtype is np.uint8 else "same_kind"
    if isinstance(where, np.ndarray):  # columns with many gaps: one stacked copy, then them
        rows = np.empty((n, block.shape[2]), block.dtype)
        if not _write_run(rows[None], 0, slice(None), part, shape, dtype):
            return False
        block[e, where] = rows
        return True
    pieces = [(0, n, where)] if isinstance(where, slice) else where
    try:
        whole = shape and list(map(len, part)).count(shape[0]) == n
        for k0, k1, sl in pieces:
            rows, some = block[e, sl], part[k0:k1] if k1 - k0 < n else part
            if whole:
                # Joining along the first axis checks every other axis, and the lengths above
                # the first: the same checks as stacking, at less than half its cost.
                np.concatenate(some, axis=0, out=rows.reshape((k1 - k0) * shape[0], *shape[1:]),
                               casting=casting)
            else:  # stacking checks every shape, and the casting rule every dtype
                np.stack(some, out=rows.reshape(k1 - k0, *shape), casting=casting)
    except (ValueError, TypeError):
        return False
    return True


def _place(block: np.ndarray, e: int, where: slice | list[tuple[int, int, slice]] | np.ndarray,
           rows: np.ndarray) -> None:
    """Write ``rows`` ``[n, dim]`` into copy ``e``'s rows ``where`` of ``block`` (see
    :func:`_write_run`)."""
    if isinstance(where, list):
        for k0, k1, sl in where:
            block[e, sl] = rows[k0:k1]
    else:
        block[e, where] = rows


def _inner_obs(part: Sequence[Any]) -> list[Any] | None:
    """The observations in Dicts ``part`` that each hold one beside its action_mask and
    nothing else; None when they do not all."""
    try:
        if sum(map(len, part)) != 2 * len(part):  # with both keys found: nothing else
            return None
        return list(map(_GET_OBS, part))
    except (TypeError, KeyError, IndexError, ValueError):  # not Dicts, or no observation
        return None


def _sound(part: Sequence[Any], shape: tuple[int, ...], dtype: Any, cuts: list[int]) -> bool:
    """The observations ``part`` are rows of a few C-contiguous arrays (their ``base``: an env
    that hands out rows of its own arrays, as magent2's do) of rows of ``shape``, whose dtype
    their block takes and whose numbers are all finite: rows that need not be written now
    (see ``StepBuffers.skip_obs``). False when it cannot tell at a glance. (Each row's own
    shape is checked when it is written: reading the shape of hundreds of arrays would cost
    what writing them does.)

    ``cuts`` (kept by the caller, updated here) are where the base changed in the last run
    looked at: envs hand out the same layout step after step, so they are only checked. An
    env that hands out arrays of their own is not looked at again (``cuts`` is ``[-1]``).
    """
    if cuts == _NOT_ROWS:
        return False
    try:
        bases = [o.base for o in part]
    except AttributeError:  # not all arrays
        cuts[:] = _NOT_ROWS
        return False
    n = len(bases)
    if not cuts or cuts[-1] != n or not all(
            _all_is(bases[c0:c1], bases[c0]) for c0, c1 in zip(cuts[:-1], cuts[1:], strict=True)):
        cuts[:] = [0, *(i + 1 for i, same in enumerate(map(operator.is_, bases[:-1], bases[1:]))
                        if not same), n]
    for c in cuts[:-1]:
        base = bases[c]
        if (not isinstance(base, np.ndarray) or base.shape[1:] != shape
                or not base.flags.c_contiguous
                or not (base.dtype.kind in "biuf" if dtype is np.float32
                        else base.dtype == dtype)):
            cuts[:] = _NOT_ROWS
            return False
        if base.dtype.kind == "f":
            flat = base.reshape(-1)
            if not math.isfinite(flat.dot(flat)):
                return False
    return True


def _all_is(items: list[Any], one: Any) -> bool:
    """Every one of ``items`` is ``one``, or (for arrays) equal to it in every number (so
    finite where ``one`` is: a NaN equals nothing)."""
    try:
        # List equality takes identical items as equal without comparing them: a loop in C.
        return bool(items == [one] * len(items))
    except (ValueError, TypeError):  # an array compared with another: not the same one
        return False


_GET_MASK = operator.itemgetter(MASK_KEY)
_GET_OBS = operator.itemgetter("observation")
_NOT_ROWS = [-1]  # _sound's cuts for observations that are not rows of the env's arrays
_SMALL = 4096  # numbers in a run below which it is converted, not stacked
_PIECES = 16  # slices a run is written in, at most; more: by its columns (one indexed write)
_FEW = 8  # agents below which writing them one by one is as quick as one stacked write


def group_blocks(step: VecStep, agents: list[str], known: GroupBlocks | None,
                 groups: dict[str, tuple[str, ...]]) -> GroupBlocks:
    """The blocks of ``groups`` and of those ``known`` already (a second runner on one env
    keeps the first one's), filled in ``step.groups``."""
    merged = {**(known.members if known is not None else {}), **groups}
    out = GroupBlocks(step, agents, merged)
    step.groups = out.groups
    return out


class ActionBlocks(dict):
    """Each agent's ``[E, ...]`` actions (a dict, as every vector env takes them), and the
    ``[E, k, ...]`` group blocks they are views of (``blocks``: the group's agents and its
    block), so a copy's moves can be read off one block row instead of one array per agent.
    ``whole``, where the blocks are views side by side of one ``[E, A, ...]`` array in the
    blocks' agent order, is that array."""

    def __init__(self, blocks: list[tuple[tuple[str, ...], np.ndarray]],
                 whole: np.ndarray | None = None):
        super().__init__((a, block[:, j]) for agents, block in blocks
                         for j, a in enumerate(agents))
        self.blocks = blocks
        self.whole = whole


class FixedArrays(dict):
    """Per-agent arrays that stay the same objects for the env's life; only their values change.

    Whoever reads them may keep views over them instead of looking them up every step.
    ``place`` says where each agent's rows sit: its ``[E, n, dim]`` block and its column there.
    """

    place: dict[str, tuple[np.ndarray, int]]

    def __setitem__(self, key: str, value: Any) -> None:
        raise TypeError("FixedArrays: the arrays are fixed; write into them instead")


def agent_blocks(dims: dict[str, int], num_envs: int, dtype: Any,
                 fill: bool = False, alloc: Alloc = np.full) -> FixedArrays:
    """Per-agent ``[E, dim]`` arrays that are views into one ``[E, n, dim]`` block per width
    and dtype (``dtype`` is one for all, or one per agent).

    Agents of equal width and dtype sit side by side in agent order, so a policy over several
    of them can read ``[E, k, dim]`` as a view instead of a copy. Width 0 gives None.
    """
    types = dtype if isinstance(dtype, dict) else dict.fromkeys(dims, dtype)
    kinds = {a: (d, np.dtype(types[a]).str) for a, d in dims.items()}
    out: dict[str, Any] = {}
    place: dict[str, tuple[np.ndarray, int]] = {}
    for kind in dict.fromkeys(kinds.values()):
        members = [a for a, k in kinds.items() if k == kind]
        dim = kind[0]
        if dim == 0:
            out.update(dict.fromkeys(members))
            continue
        block = alloc((num_envs, len(members), dim), fill, types[members[0]])
        views = block_views(block, members)
        out.update(views)
        place.update(views.place)
    arrays = FixedArrays((a, out[a]) for a in dims)
    arrays.place = place
    return arrays


def block_views(block: np.ndarray, agents: list[str]) -> FixedArrays:
    """Per-agent ``[E, ...]`` views of an ``[E, n, ...]`` block whose column j is agent j's."""
    arrays = FixedArrays((a, block[:, j]) for j, a in enumerate(agents))
    arrays.place = {a: (block, j) for j, a in enumerate(agents)}
    return arrays


STATE_MODES = ("auto", "env")
"""How a vector env is asked for the env's global state: ``auto`` keeps it where the env has a
vector one, ``env`` where it has one of any shape (flattened)."""


def state_space_of(copy: Any, mode: str | None) -> spaces.Box | None:
    """The space of the global state copy ``copy`` (an adapter) gives, if it has one and
    ``mode`` asks for it; None otherwise.

    An env has a usable state when it declares a Box ``state_space`` (PettingZoo's ParallelEnv
    and AECEnv ``state()``). ``auto`` takes only a flat vector (an image of the whole scene,
    as pistonball's, would not suit a mixer's hypernetworks); ``env`` takes any Box.
    """
    if mode is None:
        return None
    if mode not in STATE_MODES:
        raise ValueError(f"state must be one of {STATE_MODES} or None, got {mode!r}")
    env = getattr(copy, "env", copy)
    try:
        space = getattr(env, "state_space", None)
    except Exception:  # noqa: BLE001 - a wrapper that refuses the attribute has none
        space = None
    if not isinstance(space, spaces.Box) or not callable(getattr(env, "state", None)):
        return None
    if mode == "auto" and len(space.shape) != 1:
        return None
    return space


def state_dim(space: spaces.Box | None) -> int:
    """Numbers in one flattened global state (0 without one)."""
    return 0 if space is None else int(np.prod(space.shape, dtype=np.int64))


def describe_spaces(first: Any) -> tuple[list[str], dict[str, ObsView], dict[str, ActionView],
                                          dict[str, spaces.Space], dict[str, spaces.Space]]:
    agents = list(first.possible_agents)
    obs_spaces = {a: first.observation_space(a) for a in agents}
    act_spaces = {a: first.action_space(a) for a in agents}
    obs_views = {a: obs_view(s, a) for a, s in obs_spaces.items()}
    action_views = {a: action_view(s, a) for a, s in act_spaces.items()}
    return agents, obs_views, action_views, obs_spaces, act_spaces


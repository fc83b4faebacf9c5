"""The runner: steps the copies, asks each policy once per step, books transitions.

Per step, every policy gets one batched call covering all copies and all of its agents that
must act. The runner books rewards into per-agent transitions (see ``transitions``), keeps the
stacked observations each policy sees, tracks episode returns, and calls callbacks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from interplay.actors import ActBatch, Actor
from interplay.callbacks import CallbackList
from interplay.envs.vector import VecEnv, VecStep
from interplay.episodes import EpisodeTracker, Window
from interplay.mapping import PolicySpec
from interplay.transitions import FrameStack, TransitionBook, Transitions, concat


class NonFiniteError(FloatingPointError):
    """NaN or inf where a number was expected, with where it came from."""


@dataclass
class _Group:
    spec: PolicySpec
    cols: np.ndarray
    actor: Actor
    book: TransitionBook | None
    stack: FrameStack | None
    obs: np.ndarray  # [E, k, obs_dim] what the policy sees now
    mask: np.ndarray | None  # [E, k, mask_dim]


def _gather(per_agent: dict[str, np.ndarray], agents: tuple[str, ...]) -> np.ndarray:
    if len(agents) == 1:
        return per_agent[agents[0]][:, None]
    return np.stack([per_agent[a] for a in agents], axis=1)


class Runner:
    def __init__(self, env: VecEnv, specs: dict[str, PolicySpec], actors: dict[str, Actor],
                 collect: set[str] = frozenset(), callbacks: CallbackList | None = None,
                 copies: list | None = None):
        self.env = env
        self.specs = specs
        self.callbacks = callbacks or CallbackList([])
        E = env.num_envs
        col = {a: i for i, a in enumerate(env.agents)}
        self.groups: list[_Group] = []
        for pid, spec in specs.items():
            k, dim = len(spec.agents), spec.obs_view.dim
            size = spec.config.stack_size
            view = spec.action_view
            self.groups.append(_Group(
                spec=spec, cols=np.array([col[a] for a in spec.agents]), actor=actors[pid],
                book=TransitionBook(E, k, spec.obs_dim, view.shape, view.dtype, view.mask_dim)
                if pid in collect else None,
                stack=FrameStack(E, k, dim, size) if size > 1 else None,
                obs=np.zeros((E, k, spec.obs_dim), np.float32), mask=None,
            ))
        self._actions = {
            a: np.zeros((E, *v.shape), v.dtype) for a, v in env.action_views.items()
        }
        owner = {a: pid for pid, s in specs.items() for a in s.agents}
        self.tracker = EpisodeTracker(env.agents, E, copies)
        self.window = Window(owner)
        self.env_steps = 0
        self.agent_steps = 0
        self.episodes = 0
        self._step: VecStep | None = None
        for e in range(E):
            self.callbacks.on_env_created(
                env=copies[e] if copies else env, env_index=e, runner=self)

    def reset(self, seed: int | None) -> None:
        for e in range(self.env.num_envs):
            self.tracker.drop(e)
        for g in self.groups:
            if g.book is not None:
                g.book.open[:] = False
                g.book.pending[:] = 0.0
            if g.stack is not None:
                g.stack.buf[:] = 0.0
        step = self.env.reset(seed)
        self._observe(step)
        self._step = step
        for e in range(self.env.num_envs):
            self.callbacks.on_episode_start(
                episode=self.tracker.current[e], env_index=e, runner=self)

    def step(self, explore: bool = True) -> dict[str, Transitions]:
        """One step of every copy; returns the transitions each collecting policy closed."""
        step = self._step
        if step is None:
            raise RuntimeError("call reset(seed) before step()")
        acting = step.acting
        for g in self.groups:
            acts = acting[:, g.cols]
            if acts.any():
                self._act(g, acts, step, explore)
        stepped = acting.any(axis=1)
        self.tracker.acted(acting)
        self.agent_steps += int(acting.sum())
        self.env_steps += int(stepped.sum())
        step = self.env.step(self._actions)
        closed = self._close(step)
        self._observe(step, closed)
        self._step = step
        self._episodes(step, stepped)
        return {pid: concat(parts) for pid, parts in closed.items() if parts}

    def _act(self, g: _Group, acts: np.ndarray, step: VecStep, explore: bool) -> None:
        e, s = np.nonzero(acts)
        obs = g.obs[e, s]
        mask = None if g.mask is None else g.mask[e, s]
        batch = ActBatch(obs=obs, mask=mask)
        agents = g.spec.agents
        if g.actor.wants_env_obs:
            batch.agent_ids = [agents[j] for j in s]
            if step.raw_obs is not None:
                batch.env_obs = [step.raw_obs[i][agents[j]] for i, j in zip(e, s, strict=True)]
            else:
                flat = _gather(step.obs, agents)
                batch.env_obs = [g.spec.obs_view.unflatten(flat[i, j]) for i, j in zip(e, s, strict=True)]
        action, extras = g.actor.act(batch, explore)
        view = g.spec.action_view
        if action.shape != (len(e), *view.shape):
            raise ValueError(
                f"policy {g.spec.id!r} returned actions of shape {action.shape}; expected "
                f"{(len(e), *view.shape)} for action space {g.spec.action_space}"
            )
        to_env = view.to_env_batch(action, g.actor.squashed)
        for j, agent in enumerate(agents):
            rows = s == j
            if rows.any():
                self._actions[agent][e[rows]] = to_env[rows]
        if g.book is not None:
            g.book.start(e, s, obs, action, mask, extras)

    def _close(self, step: VecStep) -> dict[str, list[Transitions]]:
        """Book rewards and close the transitions of agents whose episode ended."""
        if not np.isfinite(step.reward).all():
            e, i = np.argwhere(~np.isfinite(step.reward))[0]
            raise NonFiniteError(
                f"reward of agent {self.env.agents[i]!r} in env copy {e} is "
                f"{step.reward[e, i]} at env step {self.env_steps}"
            )
        ended_agents = step.terminated | step.truncated
        closed: dict[str, list[Transitions]] = {}
        for g in self.groups:
            parts: list[Transitions] = []
            closed[g.spec.id] = parts
            if g.book is not None:
                g.book.add_rewards(step.reward[:, g.cols])
            ended = ended_agents[:, g.cols]
            if ended.any() and (g.book is not None or g.stack is not None):
                final = _gather(step.final_obs, g.spec.agents)
                view = g.stack.push(ended, final) if g.stack is not None else final
                if g.book is not None:
                    fmask = None if g.mask is None else _gather(step.final_mask, g.spec.agents)
                    t = g.book.close(ended, view, fmask, step.terminated[:, g.cols],
                                     step.truncated[:, g.cols])
                    if t is not None:
                        parts.append(t)
                if g.stack is not None:
                    g.stack.clear(ended)
            if step.episode_end.any():
                if g.book is not None:
                    g.book.forget_pending(step.episode_end)
                if g.stack is not None:
                    g.stack.clear(step.episode_end)
        return closed

    def _observe(self, step: VecStep, closed: dict[str, list[Transitions]] | None = None) -> None:
        """Take in the observations of the agents that act next; close their last transitions."""
        for g in self.groups:
            acts = step.acting[:, g.cols]
            obs = _gather(step.obs, g.spec.agents)
            if not np.isfinite(obs[acts]).all():
                e, j = np.argwhere(acts & ~np.isfinite(obs).all(axis=2))[0]
                raise NonFiniteError(
                    f"observation of agent {g.spec.agents[j]!r} (policy {g.spec.id!r}) in env "
                    f"copy {e} holds NaN or inf at env step {self.env_steps}"
                )
            g.obs = g.stack.push(acts, obs) if g.stack is not None else obs
            g.mask = None if g.spec.action_view.mask_dim == 0 else _gather(step.mask, g.spec.agents)
            if closed is not None and g.book is not None:
                zeros = np.zeros(acts.shape, bool)
                t = g.book.close(acts, g.obs, g.mask, zeros, zeros)
                if t is not None:
                    closed[g.spec.id].append(t)

    def _episodes(self, step: VecStep, stepped: np.ndarray) -> None:
        tracker = self.tracker
        tracker.stepped(stepped, step.reward, step.terminated | step.truncated)
        if self.callbacks.wants_steps:
            for e in np.nonzero(stepped)[0]:
                self.callbacks.on_episode_step(
                    episode=tracker.current[e], env_index=int(e), runner=self)
        for e in np.nonzero(step.episode_end)[0]:
            ep = tracker.finish(int(e))
            self.episodes += 1
            self.callbacks.on_episode_end(episode=ep, env_index=int(e), runner=self)
            self.window.add(ep)
            self.callbacks.on_episode_start(
                episode=tracker.current[e], env_index=int(e), runner=self)

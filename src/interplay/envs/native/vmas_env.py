"""VMAS scenarios (``env.id: vmas:<scenario>``): all copies of a task in one batched torch
simulation, its outputs written straight into the step's agent blocks.

VMAS steps every copy at once and returns one ``[E, ...]`` tensor per agent. Each step here is
one ``step`` call of VMAS, one stacked copy of the observations per block of agents of one
width, and one of the rewards: no loop over copies, no per-agent dicts. Copies whose episode
ended are reset where they are (``reset_at``), or all at once when all ended together (a
fixed horizon does that), and their final observations are kept in ``final_obs``.

A checkpoint cannot hold a VMAS simulation (VMAS has no way to read or set its physics state),
so a resumed run starts fresh episodes in every copy; the counters, the learner and every RNG
go on (see :attr:`VmasEnv.no_snapshot_reason`).
"""

from __future__ import annotations

import contextlib
import difflib
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from interplay.envs.batch import FixedArrays, VecStep, agent_blocks
from interplay.envs.groups import GroupBlocks
from interplay.envs.native.base import BlockEnv
from interplay.envs.registry import EnvSpecError, register_native_family
from interplay.envs.spaces import action_view, obs_view
from interplay.errors import UserError

FAMILY = "vmas"

DEFAULT_MAX_STEPS = 100
"""Steps per episode when neither ``env.kwargs.max_steps`` nor ``train.max_steps_per_episode``
sets one: most VMAS scenarios never end by themselves, and BenchMARL's navigation and balance
tasks use 100."""

# make_env arguments this adapter sets itself: the layout it reads, where the copies live.
_OWN = {
    "num_envs": "env.num_envs",
    "device": "train.device",
    "seed": "train.seed",
    "wrapper": "nothing (interplay is the wrapper)",
    "wrapper_kwargs": "nothing (interplay is the wrapper)",
    "dict_spaces": "nothing (agents are read in VMAS's order)",
    "terminated_truncated": "nothing (always on: a time limit is a truncation)",
    "grad_enabled": "nothing (interplay does not differentiate through the simulator)",
}

_UNUSED = "passed but not used by the scenario"  # VMAS's warning for unknown scenario kwargs


class VmasRenderError(UserError, RuntimeError):
    """VMAS could not draw a frame (it draws with pyglet, which needs a display or EGL)."""


def scenario_names() -> list[str]:
    """Every scenario VMAS ships: its own, its MPE ports and its debug ones."""
    vmas = _import_vmas("")
    return sorted({*vmas.scenarios, *vmas.mpe_scenarios, *vmas.debug_scenarios})


def _import_vmas(env_id: str) -> Any:
    try:
        import vmas
    except ImportError as err:
        raise EnvSpecError(f"env.id {env_id or 'vmas:...'!r}: VMAS is not installed "
                           f"(pip install 'interplay[vmas]'): {err}") from err
    return vmas


_CLASSES: dict[str, type] = {}


def vmas_class(scenario: str) -> type:
    """The batched env class of one VMAS scenario (checked when it is built)."""
    if scenario not in _CLASSES:
        _CLASSES[scenario] = type(f"Vmas_{scenario}", (VmasEnv,), {"scenario": scenario})
    return _CLASSES[scenario]


class VmasEnv(BlockEnv):
    """``num_envs`` copies of the VMAS scenario ``scenario`` on ``device``, as a vector env.

    ``kwargs`` (``env.kwargs``) go to ``vmas.make_env``: the scenario's own (``n_agents``...)
    and VMAS's (``continuous_actions``, ``max_steps``, ``multidiscrete_actions``,
    ``clamp_actions``).
    ``max_steps`` (the run's ``train.max_steps_per_episode``) and ``kwargs["max_steps"]``
    both limit an episode; with neither, :data:`DEFAULT_MAX_STEPS` does. Every copy is one
    episode of every agent: all agents act at every step and end together.
    """

    turn_based = False
    on_device = True  # built on the run's device (``train.device``)
    snapshot_supported = False
    kept_state: spaces.Space | None = None
    no_snapshot_reason = ("env.id is a VMAS scenario: VMAS cannot read or set the state of "
                          "its simulation, so a checkpoint cannot hold its copies")
    scenario = ""

    def __init__(self, num_envs: int, max_steps: int | None = None, device: str = "cpu",
                 kwargs: dict[str, Any] | None = None):
        self.env_id = f"{FAMILY}:{self.scenario}"
        self._env = self._make(num_envs, max_steps, device, dict(kwargs or {}))
        env = self._env
        # VMAS's streams are one list on its Environment class, swapped in and out in place.
        self._shared_streams: list[Any] = type(env).vmas_random_state
        self._streams = list(self._shared_streams)
        self.num_envs = E = num_envs
        self.device = env.device
        self.agents = [a.name for a in env.agents]
        if len(set(self.agents)) != len(self.agents):  # the agent axis needs unique names
            self.agents = [f"agent_{i}" for i in range(len(self.agents))]
        self.observation_spaces = {a: _gymnasium(s) for a, s in
                                   zip(self.agents, env.observation_space, strict=True)}
        self.action_spaces = {a: _gymnasium(s) for a, s in
                              zip(self.agents, env.action_space, strict=True)}
        self.obs_views = {a: obs_view(s, a) for a, s in self.observation_spaces.items()}
        self.action_views = {a: action_view(s, a) for a, s in self.action_spaces.items()}
        self.continuous_actions = bool(env.continuous_actions)
        dims = {a: v.dim for a, v in self.obs_views.items()}
        self._obs = agent_blocks(dims, E, np.float32)
        self._final_obs = agent_blocks(dims, E, np.float32)
        # Each block of agents of one width, with the torch view VMAS's tensors are stacked into.
        self._blocks = _blocks(self._obs, self.agents)
        self._final_blocks = [block for block, _, _ in _blocks(self._final_obs, self.agents)]
        mask_dims = {a: v.mask_dim for a, v in self.action_views.items()}
        self._mask = agent_blocks(mask_dims, E, bool, fill=True)
        self._groups: GroupBlocks | None = None
        self._reward = np.zeros((E, len(self.agents)), np.float64)
        self._terminated = np.zeros((E, len(self.agents)), bool)
        self._truncated = np.zeros((E, len(self.agents)), bool)
        self._episode_end = np.zeros(E, bool)
        import torch

        self._reward_t = torch.from_numpy(self._reward)
        self._on_cpu = self.device.type == "cpu"
        self._started = False
        self._view = VecStep(
            obs=self._obs, mask=self._mask, acting=np.ones((E, len(self.agents)), bool),
            reward=self._reward, terminated=self._terminated, truncated=self._truncated,
            final_obs=self._final_obs, final_mask=agent_blocks(mask_dims, E, bool, fill=True),
            episode_end=self._episode_end, flagged=False, all_legal=True, all_acting=True,
        )

    # -- building -------------------------------------------------------------------------
    def _make(self, num_envs: int, max_steps: int | None, device: str,
              kwargs: dict[str, Any]) -> Any:
        vmas = _import_vmas(self.env_id)
        names = scenario_names()
        if self.scenario not in names:
            close = difflib.get_close_matches(self.scenario, names, n=1)
            hint = f" (did you mean {FAMILY}:{close[0]}?)" if close else ""
            raise EnvSpecError(f"env.id {self.env_id!r}: VMAS has no scenario "
                               f"{self.scenario!r}{hint}; its scenarios: {', '.join(names)}")
        own = [k for k in kwargs if k in _OWN]
        if own:
            raise EnvSpecError("; ".join(f"env.kwargs.{k}: set by interplay from {_OWN[k]}"
                                         for k in own))
        limit = kwargs.pop("max_steps", None)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 1):
            raise EnvSpecError(f"env.kwargs.max_steps: a positive whole number of steps per "
                               f"episode, got {limit!r}")
        horizon = [h for h in (limit, max_steps) if h is not None]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                env = vmas.make_env(self.scenario, num_envs=num_envs, device=device,
                                    max_steps=min(horizon) if horizon else DEFAULT_MAX_STEPS,
                                    terminated_truncated=True, **kwargs)
            except Exception as err:  # noqa: BLE001 - VMAS checks its settings with asserts
                given = ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) or "no env.kwargs"
                raise EnvSpecError(f"env: building VMAS scenario {self.scenario!r} with "
                                   f"{given} raised {type(err).__name__}: {err}") from err
        unused = [w for w in caught if _UNUSED in str(w.message)]
        if unused:
            keys = ", ".join(f"env.kwargs.{k}" for k in sorted(_unused_keys(unused, kwargs)))
            raise EnvSpecError(f"{keys}: not used by VMAS scenario {self.scenario!r} (VMAS "
                               "takes continuous_actions, max_steps, multidiscrete_actions, "
                               "clamp_actions and the scenario's own settings)")
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return env

    # -- the VecEnv interface -------------------------------------------------------------
    def reset(self, seed: int | None = None) -> VecStep:
        with self._own_streams():
            obs = self._env.reset(seed=seed)
        self._write_obs(obs)
        self._clear()
        return self._begun()

    def step(self, actions: dict[str, np.ndarray]) -> VecStep:
        if not self._started:
            raise RuntimeError(f"env {self.env_id!r}: call reset() before step()")
        if self._view.flagged:
            self._clear()
        with self._own_streams():
            obs, rewards, terminated, truncated, _ = self._env.step(
                self._torch_actions(actions))
        self._write_obs(obs)
        self._write_rewards(rewards)
        done = terminated | truncated
        flagged = bool(done.any())
        self._view.flagged = flagged
        self._record("step")
        if flagged:
            self._end_episodes(done.cpu().numpy(), terminated.cpu().numpy())
        if self._groups is not None:
            self._groups.refresh(flagged)
        return self._view

    def close(self) -> None:
        viewer = getattr(self._env, "viewer", None)
        if viewer is not None:
            viewer.close()
            self._env.viewer = None

    # -- per step -------------------------------------------------------------------------
    def _torch_actions(self, actions: dict[str, np.ndarray]) -> list[Any]:
        import torch

        try:
            return [torch.from_numpy(np.asarray(actions[a])) for a in self.agents]
        except KeyError as err:
            raise KeyError(f"env {self.env_id!r}: no actions for agent {err.args[0]!r}") from None

    def _write_obs(self, obs: Sequence[Any], rows: np.ndarray | None = None) -> None:
        """VMAS's per-agent observations into the agent blocks: one stacked write per block
        (of all copies, or of copies ``rows``)."""
        import torch

        for block, members, block_t in self._blocks:
            parts = [_flat(obs[i]) for i in members]
            if rows is not None:
                block[rows] = torch.stack(parts, dim=1).cpu().numpy()[rows]
            elif self._on_cpu:
                torch.stack(parts, dim=1, out=block_t)
            else:
                block_t.copy_(torch.stack(parts, dim=1))

    def _write_rewards(self, rewards: Sequence[Any]) -> None:
        import torch

        if self._on_cpu:
            torch.stack(rewards, dim=1, out=self._reward_t)
        else:
            self._reward_t.copy_(torch.stack(rewards, dim=1))

    def _end_episodes(self, done: np.ndarray, terminated: np.ndarray) -> None:
        """Close the episodes of copies ``done`` (their final observations kept) and start
        new ones there."""
        rows = slice(None) if done.all() else np.flatnonzero(done)
        for block, final in zip((b for b, _, _ in self._blocks), self._final_blocks, strict=True):
            final[rows] = block[rows]
        self._terminated[rows] = terminated[rows, None]
        self._truncated[rows] = ~terminated[rows, None]  # a time limit, where not terminated
        self._episode_end[rows] = True
        with self._own_streams():
            if isinstance(rows, slice):  # every copy ended together: one batched reset
                self._write_obs(self._env.reset())
            else:
                for e in rows:  # VMAS resets one copy or all: only ended copies loop
                    self._env.reset_at(int(e), return_observations=False)
                (obs,) = self._env.get_from_scenario(get_observations=True, get_rewards=False,
                                                     get_infos=False, get_dones=False)
                self._write_obs(obs, rows)
        self._record("start", done)

    @contextlib.contextmanager
    def _own_streams(self) -> Iterator[None]:
        """VMAS's random streams as this env's own while VMAS runs.

        VMAS keeps one set of streams (torch, NumPy, random) for every env it builds; a test
        env seeded at each test phase would otherwise set the training copies' resets back to
        the same draws after every phase. Swapping the three states is three references.
        """
        shared = self._shared_streams
        outside = list(shared)
        shared[:] = self._streams
        try:
            yield
        finally:
            self._streams = list(shared)
            shared[:] = outside

    def _clear(self) -> None:
        self._terminated[:] = False
        self._truncated[:] = False
        self._episode_end[:] = False

    # -- pictures -------------------------------------------------------------------------
    def render_rgb(self, e: int = 0) -> np.ndarray:
        """Copy ``e`` as VMAS draws it: an RGB frame ``[H, W, 3]`` of uint8."""
        try:
            frame = self._env.render(mode="rgb_array", env_index=e, visualize_when_rgb=False)
        except Exception as err:  # noqa: BLE001 - pyglet fails in many ways without a display
            raise VmasRenderError(
                f"env {self.env_id!r}: VMAS could not draw copy {e} ({type(err).__name__}: "
                f"{err}); it draws with pyglet, which needs a display (DISPLAY, or Xvfb: "
                "xvfb-run interplay ...) or a headless EGL device") from err
        return np.asarray(frame, np.uint8)



def _blocks(arrays: FixedArrays, agents: list[str]) -> list[tuple[np.ndarray, list[int], Any]]:
    """Each ``[E, k, dim]`` block under ``arrays``, the indices (in ``agents``) of its agents
    in slot order, and a torch tensor sharing its memory."""
    import torch

    out: dict[int, tuple[np.ndarray, list[int], Any]] = {}
    for i, a in enumerate(agents):
        block, _ = arrays.place[a]
        if id(block) not in out:
            out[id(block)] = (block, [], torch.from_numpy(block))
        out[id(block)][1].append(i)
    return list(out.values())


def _flat(obs: Any) -> Any:
    """One agent's observation for every copy as ``[E, dim]``: a tensor as it is, a dict of
    them (a Dict space) joined in the space's order (its keys sorted)."""
    import torch

    if isinstance(obs, dict):
        return torch.cat([_flat(obs[k]) for k in sorted(obs)], dim=1)
    return obs.reshape(obs.shape[0], -1)


def _gymnasium(space: Any) -> spaces.Space:
    """A space of the older ``gym`` package (what VMAS builds) as the gymnasium one."""
    kind = type(space).__name__
    if kind == "Box":
        return spaces.Box(low=space.low, high=space.high, shape=space.shape, dtype=space.dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(space.n), start=int(getattr(space, "start", 0)))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(space.nvec)
    if kind == "Dict":
        return spaces.Dict({k: _gymnasium(v) for k, v in space.spaces.items()})
    if kind == "Tuple":
        return spaces.Tuple([_gymnasium(v) for v in space.spaces])
    raise EnvSpecError(f"VMAS space {space} has no gymnasium counterpart here")


def _unused_keys(caught: list[warnings.WarningMessage], kwargs: dict[str, Any]) -> set[str]:
    text = " ".join(str(w.message) for w in caught)
    return {k for k in kwargs if repr(k) in text} or set(kwargs)


register_native_family(FAMILY, vmas_class)  # vmas:<scenario>, VMAS imported when one is built

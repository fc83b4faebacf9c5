"""``interplay check ENV``: PettingZoo's API test plus the rules interplay relies on.

Each problem found is reported with what to change in the env.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable
from copy import copy as shallow_copy
from typing import Any

import numpy as np
from gymnasium import spaces

from interplay.config.schema import Config
from interplay.envs.adapters import CopyStep, EnvContractError, adapt, is_aec
from interplay.envs.composite import is_composite, sample_mask
from interplay.envs.images import is_image
from interplay.envs.registry import env_factory, make_native, native_env_class
from interplay.envs.spaces import MASK_KEY, ActionView, SpaceError, action_view, obs_view
from interplay.errors import ConfigError


def check_env(cfg: Config, cycles: int = 200, say: Callable[[str], None] = print) -> list[str]:
    """Run every check on ``cfg.env``; returns the problems (empty when the env passes)."""
    if cycles < 1:
        raise ConfigError(f"--cycles must be at least 1 (env steps to try), got {cycles}")
    native = native_env_class(cfg.env.id)
    if native is not None:
        return _check_batched(native, cfg, cycles, say)
    make = env_factory(cfg.env.id, cfg.env.kwargs, cfg.env.api)
    problems: list[str] = []

    def problem(text: str, fix: str) -> None:
        problems.append(text)
        say(f"FAIL  {text}\n      fix: {fix}")

    _pettingzoo_api_test(make, cycles, say, problem)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _our_checks(make, cycles, cfg.train.seed, problem, say)
    except (EnvContractError, SpaceError) as err:
        problem(str(err), "follow the PettingZoo API for the case named above")
    except Exception as err:  # the env raised: a problem to report, not a crash of the check
        problem(f"the env raised {type(err).__name__}: {err}",
                "see the env's own error above; interplay's checks step it with legal random actions")
    _say_once(caught, "while stepping the env", say)
    if not problems:
        say(f"ok    {cfg.env.id}: passed the PettingZoo API test and interplay's checks")
    return problems


BATCH_CHECK_COPIES = 2


def _check_batched(cls: type, cfg: Config, cycles: int, say: Callable[[str], None]) -> list[str]:
    """A natively batched env (built-in, or a VMAS scenario): ``cycles`` steps of two copies
    with random actions; every observation and reward must be finite."""
    env = make_native(cls, BATCH_CHECK_COPIES, cfg.train.max_steps_per_episode, "cpu",
                      cfg.env.kwargs)
    problems: list[str] = []
    rng = np.random.default_rng(cfg.train.seed)
    try:
        step = env.reset(cfg.train.seed)
        ends = 0
        for t in range(cycles):
            bad = _non_finite(step, env.agents)
            if bad:
                problems.append(f"step {t}: {bad}")
                say(f"FAIL  {cfg.env.id}: step {t}: {bad}\n      fix: see the env's settings "
                    "(env.kwargs) or report it to the env's authors")
                break
            step = env.step({a: _random_rows(env.action_spaces[a], BATCH_CHECK_COPIES, rng)
                             for a in env.agents})
            ends += int(np.count_nonzero(step.episode_end))
    finally:
        env.close()
    if not problems:
        say(f"ok    {cfg.env.id}: a natively batched env: {cycles} steps of "
            f"{BATCH_CHECK_COPIES} copies with random actions ({ends} episodes ended), every "
            "observation and reward finite")
    return problems


def _non_finite(step: Any, agents: list[str]) -> str:
    """What is not finite in a batched step (an agent's observation, a reward), or ''."""
    for a in agents:
        if not np.isfinite(step.obs[a]).all():
            return f"agent {a!r}: observation not finite"
    for i, a in enumerate(agents):
        if not np.isfinite(step.reward[:, i]).all():
            return f"agent {a!r}: reward not finite"
    return ""


def _random_rows(space: spaces.Space, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` random actions of ``space`` as a batched env takes them."""
    if isinstance(space, spaces.Discrete):
        return rng.integers(space.n, size=n)
    if isinstance(space, spaces.MultiDiscrete):
        return rng.integers(space.nvec, size=(n, *space.shape))
    low, high = np.maximum(space.low, -1.0), np.minimum(space.high, 1.0)
    return rng.uniform(low, high, size=(n, *space.shape)).astype(np.float32)


def _pettingzoo_api_test(make: Callable[[], Any], cycles: int, say, problem) -> None:
    from pettingzoo.test import api_test, parallel_api_test

    env = make()
    aec = is_aec(env)
    test = api_test if aec else parallel_api_test
    quiet = io.StringIO()
    caught: list[warnings.WarningMessage] = []
    try:
        with contextlib.redirect_stdout(quiet), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            test(env if aec else _ParallelTestView(env), num_cycles=min(cycles, 100))
        _say_once([w for w in caught if "pettingzoo" in str(w.filename)], "PettingZoo API test", say)
        say(f"ok    PettingZoo {'AEC' if aec else 'Parallel'} API test")
    except Exception as err:  # the API test raises plain assertions and arbitrary errors
        problem(f"PettingZoo API test: {type(err).__name__}: {err}",
                "see the PettingZoo env API docs for the rule named in the message")
    finally:
        with contextlib.suppress(Exception):
            env.close()


def _say_once(caught: list[warnings.WarningMessage], where: str, say: Callable[[str], None]) -> None:
    """Each distinct warning once, with how often it came."""
    counts: dict[str, int] = {}
    for w in caught:
        text = str(w.message)
        counts[text] = counts.get(text, 0) + 1
    for text, n in counts.items():
        say(f"warn  {where}: {text}" + (f" ({n} times)" if n > 1 else ""))


class _ParallelTestView:
    """A Parallel env as PettingZoo's Parallel API test sees it, with two gaps of that test
    filled the way interplay's runner fills them: an agent whose ``info`` holds an
    ``action_mask`` gets a legal action (the test samples masks only from observations), and an
    agent that arrived mid-episode without reward or flags gets an action and, in the dicts the
    test reads, a reward of 0 and False flags (the test would look them up and fail)."""

    def __init__(self, env: Any):
        self.__dict__["_env"] = env
        self.__dict__["_infos"] = {}
        self.__dict__["_spaces"] = {}

    def action_space(self, agent: str) -> Any:
        """The env's space; a Dict or Tuple one reads the observation's ``action_mask`` in
        either of the forms interplay takes (the test hands it to ``sample`` as it is)."""
        space = self._env.action_space(agent)
        if not is_composite(space):
            return space
        if agent not in self._spaces or self._spaces[agent][0] is not space:
            self._spaces[agent] = (space, _mask_sampling(space, agent))
        return self._spaces[agent][1]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._env, name, value)  # the test sets max_cycles on the env

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        obs, infos = self._env.reset(*args, **kwargs)
        self.__dict__["_infos"] = infos
        return obs, infos

    def step(self, actions: dict) -> Any:
        env, chosen = self._env, dict(actions)
        before = list(env.agents)
        for a in before:
            space, info = env.action_space(a), self._infos.get(a) or {}
            mask = info.get(MASK_KEY) if isinstance(info, dict) else None
            if mask is not None and isinstance(space, spaces.Discrete):
                mask = np.asarray(mask, np.int8).reshape(-1)
                if mask.size != space.n or not mask.any():
                    mask = None  # interplay's own checks name a bad mask
            if a not in chosen or (mask is not None and not mask[int(chosen[a]) - int(space.start)]):
                chosen[a] = space.sample(mask=mask)
        obs, rewards, terms, truncs, infos = env.step(chosen)
        self.__dict__["_infos"] = infos
        for a in env.agents:
            if a not in before:
                rewards.setdefault(a, 0.0)
                terms.setdefault(a, False)
                truncs.setdefault(a, False)
        return obs, rewards, terms, truncs, infos


def _mask_sampling(space: spaces.Space, agent: str) -> spaces.Space:
    """A copy of a composite ``space`` whose ``sample(mask=...)`` takes its mask as the env
    gives it (a malformed one samples unmasked: interplay's own checks name it)."""
    view = action_view(space, agent)
    sampling = shallow_copy(space)

    def sample(mask: Any = None, *args: Any, **kwargs: Any) -> Any:
        try:
            legal = None if mask is None else view.legal(mask)
        except ValueError:
            legal = None
        if legal is None or not legal.any():
            return space.sample()
        return space.sample(mask=sample_mask(space, view.leaves, legal))

    sampling.sample = sample
    return sampling


def _our_checks(make: Callable[[], Any], cycles: int, seed: int, problem,
                say: Callable[[str], None]) -> None:
    raw = make()
    copy = adapt(raw, None)
    agents = copy.possible_agents
    obs_spaces = {a: raw.observation_space(a) for a in agents}
    act_spaces = {a: raw.action_space(a) for a in agents}
    views = {a: obs_view(s, a) for a, s in obs_spaces.items()}
    actions = {a: action_view(s, a) for a, s in act_spaces.items()}
    for i, a in enumerate(agents):
        act_spaces[a].seed(seed + i)
    reported: set[str] = set()

    def once(key: str, text: str, fix: str) -> None:
        if key not in reported:
            reported.add(key)
            problem(text, fix)

    for a in agents:
        declared = obs_spaces[a][MASK_KEY] if views[a].has_mask_key else None
        width = actions[a].mask_dim
        if isinstance(declared, spaces.Dict | spaces.Tuple):  # a mask per leaf: read per step
            declared = None
        if declared is not None and width and int(np.prod(declared.shape)) != width:
            once(f"mask-{a}", f"the observation space of {a!r} declares an action_mask of "
                 f"{int(np.prod(declared.shape))} entries, its action space {act_spaces[a]} "
                 f"needs {width}", "make the mask one entry per action")

    # an env that draws its frames only when rendering (pistonball_v6 without a render_mode)
    # hands out the same picture at every step of an episode: nothing can be learned from it
    last_frame: dict[str, np.ndarray] = {}  # this episode's
    steps_seen: dict[str, int] = {}
    moving: set[str] = set()

    def inspect(cs: CopyStep, t: int, done: set[str]) -> None:
        for a, r in cs.rewards.items():
            if not np.isfinite(r):
                once(f"rew-{a}", f"step {t}: reward of {a!r} is {r}", "rewards must be finite numbers")
        for a, o in [*cs.obs.items(), *cs.terminated.items(), *cs.truncated.items()]:
            if o is None:
                continue
            if not obs_spaces[a].contains(o):
                once(f"space-{a}", f"step {t}: observation of {a!r} is outside its space {obs_spaces[a]}",
                     "return observations of the declared dtype, shape and bounds, or widen the space")
            flat = np.zeros(views[a].dim, np.float32)
            with contextlib.suppress(Exception):
                views[a].flatten(o, flat)
            if not np.isfinite(flat).all():
                once(f"nan-{a}", f"step {t}: observation of {a!r} holds NaN or inf",
                     "clip or replace non-finite values before returning observations")
        for a in cs.obs:
            if a in done:
                once(f"dead-{a}", f"step {t}: {a!r} is asked to act after it was terminated or truncated",
                     "remove finished agents from env.agents (Parallel) or give them only their "
                     "dead step (AEC: _was_dead_step)")
            try:
                mask = _mask_of(cs.obs[a], cs.infos.get(a, {}), views[a].has_mask_key, actions[a])
            except ValueError as err:
                once(f"mask-{a}", f"step {t}: {a!r}: {err}", "give a mask per discrete leaf "
                     "keyed like the action space, or one flat vector over them all")
                continue
            if mask is not None:
                if actions[a].mask_dim and mask.size != actions[a].mask_dim:
                    once(f"mask-{a}", f"step {t}: action_mask of {a!r} has {mask.size} entries, "
                         f"its action space {act_spaces[a]} needs {actions[a].mask_dim}",
                         "make the mask one entry per action")
                elif not mask.any():
                    once(f"mask0-{a}", f"step {t}: action_mask of {a!r} allows no action",
                         "an agent asked to act needs at least one legal action")
        for a, o in cs.obs.items():
            if a in moving or not is_image(obs_spaces[a]) or o is None:
                continue
            if a in last_frame:
                steps_seen[a] = steps_seen.get(a, 0) + 1
                if not np.array_equal(last_frame[a], o):
                    moving.add(a)
            last_frame[a] = np.array(o, copy=True)
        for a in [*cs.terminated, *cs.truncated]:
            done.add(a)

    t, done = 0, set[str]()
    endings = _Endings()
    cs = copy.reset(seed=seed)
    inspect(cs, t, done)
    while t < cycles:
        for a in agents:
            if not (raw.observation_space(a) == obs_spaces[a] and raw.action_space(a) == act_spaces[a]):
                once(f"spaces-{a}", f"step {t}: the spaces of {a!r} changed between calls",
                     "return the same space object for an agent every time (functools.lru_cache)")
        moves = {}
        for a, o in cs.obs.items():
            view = actions[a]
            try:
                mask = _mask_of(o, cs.infos.get(a, {}), views[a].has_mask_key, view)
            except ValueError:  # named above
                mask = None
            usable = (mask is not None and view.kind in ("discrete", "composite")
                      and mask.size == view.mask_dim and mask.any())  # else named above
            if usable and mask is not None and view.kind == "composite":
                moves[a] = act_spaces[a].sample(mask=sample_mask(view.space, view.leaves, mask))
            else:
                moves[a] = act_spaces[a].sample(mask=mask.astype(np.int8) if usable and mask is not None else None)
        cs = copy.step(moves)
        t += 1
        inspect(cs, t, done)
        endings.add(cs)
        if cs.over:
            done = set()
            last_frame.clear()
            cs = copy.reset(seed=None)
            inspect(cs, t, done)
    copy.close()
    endings.warn(say)
    still = [a for a, n in steps_seen.items() if a not in moving and n >= STILL_STEPS]
    if still:
        n = len(still) - 1
        others = f" (and {n} other agent{'s' * (n > 1)})" if n else ""
        problem(f"the image observation of {still[0]!r}{others} stayed the same picture "
                f"through every episode ({steps_seen[still[0]]} steps of random actions)",
                "an env that draws its frames only when rendering needs a render mode: "
                "-s env.kwargs.render_mode=rgb_array (pistonball_v6 is one)")


class _Endings:
    """How the checked episodes ended: an env whose every episode is cut by truncation with
    no reward paid to anyone is likely cut before its game is played (a step limit that
    counts the env's own moves, such as chance outcomes, cuts Kuhn poker after one bet)."""

    def __init__(self) -> None:
        self.episodes = 0
        self.empty_cuts = 0
        self._paid = 0.0
        self._terminated = False

    def add(self, cs: CopyStep) -> None:
        self._paid += sum(abs(float(r)) for r in cs.rewards.values())
        self._terminated = self._terminated or bool(cs.terminated)
        if not cs.over:
            return
        self.episodes += 1
        if cs.truncated and not self._terminated and self._paid == 0.0:
            self.empty_cuts += 1
        self._paid, self._terminated = 0.0, False

    def warn(self, say: Callable[[str], None]) -> None:
        if self.episodes and self.empty_cuts == self.episodes:
            say(f"warn  every checked episode ({self.episodes}) ended by truncation with zero reward "
                "for every agent: either random play never earns a reward in it (a sparse task) "
                "or the env cuts its episodes before they are played out (a step limit counting "
                "moves the agents do not make?); check its time limit")


STILL_STEPS = 10
"""Steps within episodes after which an agent whose image never changed is named."""


def _mask_of(obs: Any, info: dict, has_key: bool, view: ActionView) -> np.ndarray | None:
    """The legal actions the env gave (ValueError for a composite space's mask that does not
    fit it), or None when it gave none."""
    if has_key and isinstance(obs, dict) and MASK_KEY in obs:  # else: outside its space, named
        source = obs[MASK_KEY]
    elif isinstance(info, dict) and MASK_KEY in info:
        source = info[MASK_KEY]
    else:
        return None
    if view.kind == "composite":
        return view.legal(source)
    return np.asarray(source, bool).reshape(-1)

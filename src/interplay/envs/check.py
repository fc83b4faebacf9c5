"""``interplay check ENV``: PettingZoo's API test plus the rules interplay relies on.

Each problem found is reported with what to change in the env.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from interplay.config.schema import Config
from interplay.envs.adapters import CopyStep, EnvContractError, adapt, is_aec
from interplay.envs.registry import env_factory, native_env_class
from interplay.envs.spaces import MASK_KEY, SpaceError, action_view, obs_view


def check_env(cfg: Config, cycles: int = 200, say: Callable[[str], None] = print) -> list[str]:
    """Run every check on ``cfg.env``; returns the problems (empty when the env passes)."""
    if native_env_class(cfg.env.id) is not None:
        say(f"{cfg.env.id}: a built-in batched env; its parity with the original is tested in the suite")
        return []
    make = env_factory(cfg.env.id, cfg.env.kwargs, cfg.env.api)
    problems: list[str] = []

    def problem(text: str, fix: str) -> None:
        problems.append(text)
        say(f"FAIL  {text}\n      fix: {fix}")

    _pettingzoo_api_test(make, cycles, say, problem)
    try:
        _our_checks(make, cycles, cfg.train.seed, problem)
    except (EnvContractError, SpaceError) as err:
        problem(str(err), "follow the PettingZoo API for the case named above")
    if not problems:
        say(f"ok    {cfg.env.id}: passed the PettingZoo API test and interplay's checks")
    return problems


def _pettingzoo_api_test(make: Callable[[], Any], cycles: int, say, problem) -> None:
    from pettingzoo.test import api_test, parallel_api_test

    env = make()
    test = api_test if is_aec(env) else parallel_api_test
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            test(env, num_cycles=min(cycles, 100))
        for w in caught:
            if "pettingzoo" in str(w.filename):
                say(f"warn  PettingZoo API test: {w.message}")
        say(f"ok    PettingZoo {'AEC' if is_aec(env) else 'Parallel'} API test")
    except Exception as err:  # the API test raises plain assertions and arbitrary errors
        problem(f"PettingZoo API test: {type(err).__name__}: {err}",
                "see the PettingZoo env API docs for the rule named in the message")
    finally:
        with contextlib.suppress(Exception):
            env.close()


def _our_checks(make: Callable[[], Any], cycles: int, seed: int, problem) -> None:
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
            mask = _mask_of(cs.obs[a], cs.infos.get(a, {}), views[a].has_mask_key)
            if mask is not None:
                if actions[a].mask_dim and mask.size != actions[a].mask_dim:
                    once(f"mask-{a}", f"step {t}: action_mask of {a!r} has {mask.size} entries, "
                         f"its action space {act_spaces[a]} needs {actions[a].mask_dim}",
                         "make the mask one entry per action")
                elif not mask.any():
                    once(f"mask0-{a}", f"step {t}: action_mask of {a!r} allows no action",
                         "an agent asked to act needs at least one legal action")
        for a in [*cs.terminated, *cs.truncated]:
            done.add(a)

    t, done = 0, set()
    cs = copy.reset(seed=seed)
    inspect(cs, t, done)
    while t < cycles:
        for a in agents:
            if not (raw.observation_space(a) == obs_spaces[a] and raw.action_space(a) == act_spaces[a]):
                once(f"spaces-{a}", f"step {t}: the spaces of {a!r} changed between calls",
                     "return the same space object for an agent every time (functools.lru_cache)")
        moves = {}
        for a, o in cs.obs.items():
            mask = _mask_of(o, cs.infos.get(a, {}), views[a].has_mask_key)
            moves[a] = act_spaces[a].sample(mask=mask.astype(np.int8) if mask is not None and
                                            actions[a].kind == "discrete" else None)
        cs = copy.step(moves)
        t += 1
        inspect(cs, t, done)
        if cs.over:
            done = set()
            cs = copy.reset(seed=None)
            inspect(cs, t, done)
    copy.close()


def _mask_of(obs: Any, info: dict, has_key: bool) -> np.ndarray | None:
    if has_key:
        return np.asarray(obs[MASK_KEY], bool).reshape(-1)
    if isinstance(info, dict) and MASK_KEY in info:
        return np.asarray(info[MASK_KEY], bool).reshape(-1)
    return None

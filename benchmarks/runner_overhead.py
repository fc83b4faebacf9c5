"""Runner speed over a bare PettingZoo loop on one env, random actions.

    python benchmarks/runner_overhead.py [--env mpe2.simple_spread_v3] [--api auto|aec|parallel]

Prints one JSON line. All loops run in this process, on the same seeds, interleaved over
several rounds; the figures are ratios of medians (1.0 = the runner costs nothing). Two bare
loops: the lean one (all of a step's actions drawn with one NumPy call and handed over with
``dict(zip(agents, actions))``; an AEC env's mover draws once), which is the denominator of
``ratio``, and the one PettingZoo's docs write (``env.action_space(agent).sample(mask)`` per
agent, the ``agent_iter``/``last`` loop for an AEC env), kept as a second column. A step is one env step of a Parallel env and one agent's move in an AEC env.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from interplay.config.validation import validate
from interplay.envs.adapters import is_aec
from interplay.envs.registry import env_factory
from interplay.experiment.build import make_specs, make_vec_env
from interplay.run.actors import RandomActor
from interplay.run.runner import Runner
from interplay.seeding import rng_for

STEPS = 4000
ROUNDS = 7
SEED = 0


def legal(obs: Any, info: dict) -> np.ndarray | None:
    if isinstance(obs, dict) and "action_mask" in obs:
        return obs["action_mask"]
    return info.get("action_mask") if info else None


def lean_action(space: Any, mask: np.ndarray | None, rng: np.random.Generator) -> Any:
    """One move of an AEC env's mover: one NumPy draw."""
    if mask is None:
        return np.int64(rng.integers(space.n))
    choices = np.flatnonzero(mask)
    return np.int64(choices[rng.integers(len(choices))])


class LeanSampler:
    """Random actions for a Parallel env's agents, all drawn with one NumPy call per step and
    handed over with ``dict(zip(agents, actions))``: the leanest loop one can write around an
    env, the honest denominator of an overhead ratio.

    Discrete and MultiDiscrete agents draw integers below their sizes (plus their starts), Box
    agents uniform values between finite bounds; agents with masks choose among legal moves:
    Discrete agents of one size that all got a mask with one draw over their stacked masks,
    any others with one draw and one lookup each.
    """

    def __init__(self, env: Any, rng: np.random.Generator, masked: bool):
        self.env, self.rng, self.masked = env, rng, masked
        self._agents: list[str] = []
        self._draw: Callable[[], Any] = lambda: ()
        self._masked_agents: list[str] = []
        self._starts: np.ndarray | None = None

    def __call__(self, obs: dict, infos: dict) -> dict:
        agents = self.env.agents
        masks = [legal(obs[a], infos.get(a)) for a in agents] if self.masked else None
        if masks is not None and any(m is not None for m in masks):
            picks = self._masked_draw(agents, masks)
            if picks is not None:
                return dict(zip(agents, picks, strict=True))
            return {a: lean_action(self.env.action_space(a), m, self.rng)
                    for a, m in zip(agents, masks, strict=True)}
        if agents != self._agents:
            self._agents, self._draw = list(agents), self._drawer(agents)
        return dict(zip(agents, self._draw(), strict=True))

    def _masked_draw(self, agents: list[str], masks: list[Any]) -> np.ndarray | None:
        """One legal move per agent from their stacked masks (the highest of one uniform
        number per move, illegal ones left out), where every agent has a Discrete space of one
        size and a mask; None otherwise."""
        if agents != self._masked_agents:  # their spaces' sizes and starts, once per order
            spaces_ = [self.env.action_space(a) for a in agents]
            same = {type(s).__name__ for s in spaces_} == {"Discrete"} and len(
                {s.n for s in spaces_}) == 1
            self._masked_agents = list(agents)
            self._starts = np.array([s.start for s in spaces_]) if same else None
        if self._starts is None or any(m is None for m in masks):
            return None
        try:
            legal_ = np.asarray(masks, dtype=bool)
        except ValueError:  # masks of different lengths
            return None
        if legal_.ndim != 2 or legal_.shape[0] != len(agents):
            return None
        scores = self.rng.random(legal_.shape)
        scores[~legal_] = -1.0
        return scores.argmax(axis=1) + self._starts

    def _drawer(self, agents: list[str]) -> Callable[[], Any]:
        spaces_ = [self.env.action_space(a) for a in agents]
        kinds = {type(s).__name__ for s in spaces_}
        rng = self.rng
        if kinds == {"Discrete"}:
            high = np.array([s.n for s in spaces_])
            start = np.array([s.start for s in spaces_])
            return (lambda: rng.integers(high)) if not start.any() else (
                lambda: rng.integers(high) + start)
        if kinds == {"MultiDiscrete"} and len({s.shape for s in spaces_}) == 1:
            nvec = np.stack([s.nvec for s in spaces_])
            return lambda: rng.integers(nvec)
        if kinds == {"Box"} and len({s.shape for s in spaces_}) == 1:
            low = np.stack([np.maximum(s.low, -1.0) for s in spaces_])
            high = np.stack([np.minimum(s.high, 1.0) for s in spaces_])
            dtype = spaces_[0].dtype
            return lambda: rng.uniform(low, high).astype(dtype, copy=False)
        return lambda: [s.sample() for s in spaces_]  # mixed spaces: no single draw fits


def bare_parallel(make: Callable[[], Any], docs_style: bool, steps: int = STEPS) -> float:
    env = make()
    obs, infos = env.reset(seed=SEED)
    rng = np.random.default_rng(SEED)
    for a in env.possible_agents:
        env.action_space(a).seed(SEED)
    masked = any(legal(obs[a], infos.get(a)) is not None for a in obs)
    lean = LeanSampler(env, rng, masked)
    start = time.perf_counter()
    for _ in range(steps):
        if docs_style and not masked:  # as PettingZoo's docs write it
            actions = {a: env.action_space(a).sample() for a in env.agents}
        elif docs_style:
            actions = {a: env.action_space(a).sample(legal(obs[a], infos.get(a)))
                       for a in env.agents}
        else:
            actions = lean(obs, infos)
        obs, _, _, _, infos = env.step(actions)
        if not env.agents:
            obs, infos = env.reset()
    return steps / (time.perf_counter() - start)


def bare_aec(make: Callable[[], Any], docs_style: bool, steps: int = STEPS) -> float:
    env = make()
    env.reset(seed=SEED)
    rng = np.random.default_rng(SEED)
    for a in env.possible_agents:
        env.action_space(a).seed(SEED)
    moves = 0
    start = time.perf_counter()
    while moves < steps:
        for agent in env.agent_iter():
            obs, _, term, trunc, info = env.last()
            if term or trunc:
                action = None
            else:
                space = env.action_space(agent)
                mask = legal(obs, info)
                action = space.sample(mask) if docs_style else lean_action(space, mask, rng)
                moves += 1
            env.step(action)
        env.reset()
    return moves / (time.perf_counter() - start)


def runner_loop(env_id: str, api: str, collect: bool, kwargs: dict | None = None,
                steps: int = STEPS) -> float:
    cfg = validate({"env": {"id": env_id, "api": api, "kwargs": kwargs or {}}})
    env, copies = make_vec_env(cfg)
    specs = make_specs(cfg, env)
    actors = {pid: RandomActor(s, rng_for(SEED, pid)) for pid, s in specs.items()}
    runner = Runner(env, specs, actors, set(specs) if collect else set(), copies=copies)
    runner.reset(SEED)
    aec = is_aec(copies[0])
    start = time.perf_counter()
    while (runner.agent_steps if aec else runner.env_steps) < steps:
        runner.step()
    done = runner.agent_steps if aec else runner.env_steps
    rate = done / (time.perf_counter() - start)
    env.close()
    return rate


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--env", default="mpe2.simple_spread_v3", help="a PettingZoo env module")
    p.add_argument("--api", default="auto", choices=["auto", "aec", "parallel"])
    args = p.parse_args()
    make = env_factory(args.env, api=args.api)
    probe = make()
    aec = is_aec(probe)
    probe.close()
    bare = bare_aec if aec else bare_parallel
    docs, lean, plain, booked = [], [], [], []
    for _ in range(ROUNDS):
        docs.append(bare(make, docs_style=True))
        lean.append(bare(make, docs_style=False))
        plain.append(runner_loop(args.env, args.api, collect=False))
        booked.append(runner_loop(args.env, args.api, collect=True))
    d, b = statistics.median(docs), statistics.median(lean)
    p_, k = statistics.median(plain), statistics.median(booked)
    print(json.dumps({
        "benchmark": "runner_overhead", "env": args.env, "api": "aec" if aec else "parallel",
        "num_envs": 1, "steps": STEPS, "rounds": ROUNDS,
        "bare_docs_loop_steps_per_s": round(d, 1), "bare_lean_loop_steps_per_s": round(b, 1),
        "runner_steps_per_s": round(p_, 1), "runner_collecting_steps_per_s": round(k, 1),
        "ratio": round(p_ / b, 3), "ratio_collecting": round(k / b, 3),
        "ratio_vs_docs_loop": round(p_ / d, 3), "ratio_collecting_vs_docs_loop": round(k / d, 3),
    }))


if __name__ == "__main__":
    main()

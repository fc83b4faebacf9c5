"""The runner over the lean bare loop with many agents, for the kinds of spaces envs hand over.

    python benchmarks/space_variants.py [--agents 500] [--variants plain box ...]

One JSON line per variant of ``Crowd``, a cheap Parallel env defined here whose agents' spaces
and layout vary: ``plain`` (a Box of 4 floats each, Discrete(5) actions, one array per agent),
``rows`` (the observations rows of one array, as magent2 hands them out), ``box`` (Box
actions), ``multi_discrete`` (MultiDiscrete actions), ``dict`` (Dict observations of Boxes),
``masked_dict`` (the observation beside its action_mask in a Dict, PettingZoo's board-game
way), ``discrete`` (a Discrete cell index), ``tuple`` (a Tuple of a Discrete cell and a Box),
``info_masks`` (the action_mask in each agent's info), ``leaving`` (agents leave now
and then), ``alternating`` (two teams of different observation widths taking turns in the
env's order) and ``mixed`` (Box actions, Dict observations, agents leaving). Random actions
through the runner (one copy) against the lean loop of ``runner_overhead.py``, interleaved
over rounds in this process; ``ratio`` is the runner's rate over the lean loop's.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

import numpy as np
from gymnasium import spaces
from runner_overhead import bare_parallel, runner_loop

from interplay.envs.registry import env_factory, register_env

ROUNDS = 3
VARIANTS = {
    "plain": {},
    "rows": {"rows": True},
    "box": {"actions": "box"},
    "multi_discrete": {"actions": "multi_discrete"},
    "dict": {"observations": "dict"},
    "masked_dict": {"observations": "masked_dict"},
    "discrete": {"observations": "discrete"},
    "tuple": {"observations": "tuple"},
    "info_masks": {"info_masks": True},
    "leaving": {"leaving": True},
    "alternating": {"alternating": True},
    "mixed": {"actions": "box", "observations": "dict", "leaving": True},
}
_MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], np.float32) * 0.01


class Crowd:
    """Points that move about the plane, each paid minus its distance from the origin, seeing
    its position and its offset from the crowd's centre; episodes of ``max_cycles`` steps."""

    metadata = {"name": "crowd_v0"}

    def __init__(self, n_agents: int = 500, actions: str = "discrete",
                 observations: str = "box", rows: bool = False, info_masks: bool = False,
                 leaving: bool = False, alternating: bool = False, max_cycles: int = 50):
        self.possible_agents = ([f"{'xy'[i % 2]}_{i}" for i in range(n_agents)] if alternating
                                else [f"a_{i}" for i in range(n_agents)])
        self.kind, self.shape, self.rows = actions, observations, rows
        self.info_masks, self.leaving, self.alternating = info_masks, leaving, alternating
        self.max_cycles = max_cycles
        self._act = {"discrete": spaces.Discrete(5),
                     "box": spaces.Box(-1.0, 1.0, (2,), np.float32),
                     "multi_discrete": spaces.MultiDiscrete([3, 3])}[actions]
        box = spaces.Box(-9.0, 9.0, (4,), np.float32)
        self._obs = {"box": box,
                     "dict": spaces.Dict({"pos": spaces.Box(-9.0, 9.0, (2,), np.float32),
                                          "offset": spaces.Box(-9.0, 9.0, (2,), np.float32)}),
                     "discrete": spaces.Discrete(16),
                     "tuple": spaces.Tuple((spaces.Discrete(16),
                                            spaces.Box(-9.0, 9.0, (2,), np.float32))),
                     "masked_dict": spaces.Dict({"observation": box,
                                                 "action_mask": spaces.Box(0, 1, (5,), np.int8)})
                     }[observations]
        self._wide = spaces.Box(-9.0, 9.0, (6,), np.float32)
        self._mask = np.array([1, 1, 0, 1, 1], np.int8)

    def observation_space(self, agent: str) -> spaces.Space:
        return self._wide if self.alternating and agent[0] == "y" else self._obs

    def action_space(self, agent: str) -> spaces.Space:
        return self._act

    def reset(self, seed: int | None = None, options: dict | None = None):
        rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        self.pos = rng.uniform(-1, 1, (len(self.agents), 2)).astype(np.float32)
        return self._observe(), self._infos()

    def _infos(self) -> dict[str, dict]:
        return {a: {"action_mask": self._mask} if self.info_masks else {} for a in self.agents}

    def _observe(self) -> dict[str, Any]:
        n = len(self.agents)
        pos = self.pos[:n]
        rows = np.concatenate([pos, pos.mean(axis=0) - pos], axis=1)
        if self.rows:
            return dict(zip(self.agents, rows, strict=True))
        if self.shape == "dict":
            return {a: {"pos": np.array(r[:2]), "offset": np.array(r[2:])}
                    for a, r in zip(self.agents, rows, strict=True)}
        if self.shape in ("discrete", "tuple"):  # the cell of a 4x4 grid over the plane
            cells = (np.clip(pos + 2.0, 0.0, 3.99) // 1).astype(int) @ np.array([4, 1])
            if self.shape == "discrete":
                return dict(zip(self.agents, cells.tolist(), strict=True))
            return {a: (c, np.array(r[2:])) for a, c, r in zip(self.agents, cells.tolist(), rows,
                                                              strict=True)}
        if self.shape == "masked_dict":
            return {a: {"observation": np.array(r), "action_mask": self._mask}
                    for a, r in zip(self.agents, rows, strict=True)}
        if self.alternating:
            return {a: np.concatenate([r, r[:2]]) if a[0] == "y" else np.array(r)
                    for a, r in zip(self.agents, rows, strict=True)}
        return dict(zip(self.agents, [np.array(r) for r in rows], strict=True))

    def step(self, actions: dict):
        n = len(self.agents)
        moves = np.array([actions[a] for a in self.agents])
        if self.kind == "discrete":
            moves = _MOVES[moves]
        elif self.kind == "multi_discrete":
            moves = (moves - 1) * 0.01
        self.pos[:n] = np.clip(self.pos[:n] + 0.01 * moves, -2.0, 2.0)
        self.t += 1
        rewards = dict(zip(self.agents, (-np.abs(self.pos[:n]).sum(axis=1)).tolist(),
                           strict=True))
        cut = self.t >= self.max_cycles
        leaves = self.agents[-1] if self.leaving and self.t % 10 == 0 and n > 1 else None
        terms = {a: a == leaves for a in self.agents}
        truncs = dict.fromkeys(self.agents, cut)
        obs, infos = self._observe(), self._infos()
        self.agents = [] if cut else [a for a in self.agents if a != leaves]
        return obs, rewards, terms, truncs, infos

    def close(self) -> None:
        pass


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--agents", type=int, default=500)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--steps", type=int, default=400)
    args = p.parse_args()
    register_env("space_variants_crowd", lambda **kw: Crowd(**kw))
    for name in args.variants:
        kwargs = {"n_agents": args.agents, **VARIANTS[name]}
        make = env_factory("space_variants_crowd", kwargs, "parallel")
        lean, ours = [], []
        for _ in range(ROUNDS):
            lean.append(bare_parallel(make, False, args.steps))
            ours.append(runner_loop("space_variants_crowd", "parallel", False, kwargs,
                                    args.steps))
        b, r = statistics.median(lean), statistics.median(ours)
        print(json.dumps({
            "benchmark": "space_variants", "variant": name, "agents": args.agents,
            "steps": args.steps, "rounds": ROUNDS, "bare_lean_steps_per_s": round(b, 1),
            "runner_steps_per_s": round(r, 1), "ratio": round(r / b, 3),
        }), flush=True)


if __name__ == "__main__":
    main()

"""``Aim``: each agent's action is a Dict (or Tuple) of a masked discrete choice and a force.

At every step each agent sees a target: one of ``n_moves`` moves (one-hot) and a force in
``[-1, 1]``. Its action is ``{"move": Discrete(n_moves), "force": Box(-1, 1, (1,))}`` and it
is paid ``1 - |force - target force|`` (at least 0) when the move is the target, 0 otherwise:
both heads must be right. One move that is never the target is illegal at each step; the
observation's ``action_mask`` says which, keyed like the action space (``{"move": flags}``),
or as one flat vector (``mask_form="flat"``). An illegal move is counted in
``illegal_moves`` and paid -1. Episodes are truncated after ``max_cycles`` steps.

A uniformly random policy gets about ``1 / (n_moves - 1) * 1 / 3`` per agent and step; a
perfect one gets 1. ``action_form="tuple"`` gives the action as ``Tuple(move, force)``
instead. ``render_mode`` ``"ansi"`` draws the last step as text, ``"rgb_array"`` as a picture.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from interplay.envs.toy.games import SharedSpaces, cut_at_max_cycles

ACTION_FORMS = ("dict", "tuple")
MASK_FORMS = ("dict", "flat")
RENDER_MODES = ("ansi", "rgb_array")


class Aim(SharedSpaces):
    metadata = {"name": "aim_v0", "render_modes": list(RENDER_MODES)}

    def __init__(self, n_agents: int = 2, n_moves: int = 4, max_cycles: int = 8,
                 action_form: str = "dict", mask_form: str = "dict",
                 render_mode: str | None = None):
        if n_agents < 1 or n_moves < 2 or max_cycles < 1:
            raise ValueError(f"need n_agents >= 1, n_moves >= 2 and max_cycles >= 1; got "
                             f"{n_agents}, {n_moves}, {max_cycles}")
        for name, value, allowed in (("action_form", action_form, ACTION_FORMS),
                                     ("mask_form", mask_form, MASK_FORMS),
                                     ("render_mode", render_mode, (None, *RENDER_MODES))):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        move, force = spaces.Discrete(n_moves), spaces.Box(-1.0, 1.0, (1,), np.float32)
        action = (spaces.Dict({"move": move, "force": force}) if action_form == "dict"
                  else spaces.Tuple((move, force)))
        flags = spaces.Box(0, 1, (n_moves,), np.int8)
        key = "move" if action_form == "dict" else 0
        mask = spaces.Dict({key: flags}) if mask_form == "dict" else flags
        obs = spaces.Dict({"observation": spaces.Box(-1.0, 1.0, (n_moves + 1,), np.float32),
                           "action_mask": mask})
        super().__init__([f"archer_{i}" for i in range(n_agents)], obs, action)
        self.n_moves, self.max_cycles = n_moves, max_cycles
        self.action_form, self.mask_form, self.render_mode = action_form, mask_form, render_mode
        self.illegal_moves = 0
        self._last: dict[str, tuple[int, float]] = {}

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        self._last = {}
        self._draw()
        return self._observe(), {a: {} for a in self.agents}

    def _draw(self) -> None:
        n = len(self.agents)
        self.target = self._rng.integers(0, self.n_moves, n)
        self.force = self._rng.uniform(-1.0, 1.0, n).astype(np.float32)
        # one illegal move per agent, never the target
        self.banned = (self.target + self._rng.integers(1, self.n_moves, n)) % self.n_moves

    def _observe(self) -> dict[str, dict[str, Any]]:
        out = {}
        for i, a in enumerate(self.agents):
            obs = np.zeros(self.n_moves + 1, np.float32)
            obs[self.target[i]] = 1.0
            obs[-1] = self.force[i]
            flags = np.ones(self.n_moves, np.int8)
            flags[self.banned[i]] = 0
            key = "move" if self.action_form == "dict" else 0
            out[a] = {"observation": obs,
                      "action_mask": {key: flags} if self.mask_form == "dict" else flags}
        return out

    def step(self, actions: dict):
        rewards = {}
        for i, a in enumerate(self.agents):
            move, force = self._parts(actions[a])
            if move == self.banned[i]:
                self.illegal_moves += 1
                rewards[a] = -1.0
            else:
                hit = move == self.target[i]
                rewards[a] = float(hit) * max(0.0, 1.0 - abs(force - float(self.force[i])))
            self._last[a] = (move, force)
        self._shown = (self.target.copy(), self.force.copy(), self.banned.copy())
        self.t += 1
        self._draw()
        return cut_at_max_cycles(self, self._observe(), rewards, self.max_cycles)

    def _parts(self, action: Any) -> tuple[int, float]:
        if self.action_form == "dict":
            return int(action["move"]), float(np.asarray(action["force"]).reshape(-1)[0])
        return int(action[0]), float(np.asarray(action[1]).reshape(-1)[0])

    def render(self) -> Any:
        if self.render_mode is None:
            return None
        target, force, banned = getattr(self, "_shown", (self.target, self.force, self.banned))
        if self.render_mode == "ansi":
            lines = []
            for i, a in enumerate(self.possible_agents[:len(target)]):
                move, pushed = self._last.get(a, (-1, 0.0))
                cells = "".join("x" if m == banned[i] else "T" if m == target[i] else
                                "*" if m == move else "." for m in range(self.n_moves))
                lines.append(f"{a}: [{cells}] move {move} force {pushed:+.2f} "
                             f"(target {int(target[i])}, {float(force[i]):+.2f})")
            return "\n".join(lines)
        return self._picture(target, force, banned)

    def _picture(self, target: np.ndarray, force: np.ndarray, banned: np.ndarray) -> np.ndarray:
        """One band per agent: its moves as cells (target green, banned grey, chosen red),
        then a bar with the target force (green) and the force pushed (red)."""
        cell, n = 16, self.n_moves
        frame = np.full((cell * 2 * max(len(target), 1), cell * (n + 4), 3), 255, np.uint8)
        for i, a in enumerate(self.possible_agents[:len(target)]):
            move, pushed = self._last.get(a, (-1, 0.0))
            top = i * 2 * cell
            for m in range(n):
                color = ((160, 160, 160) if m == banned[i] else (40, 180, 40) if m == target[i]
                         else (230, 230, 230))
                frame[top + 2:top + cell - 2, m * cell + 2:(m + 1) * cell - 2] = color
                if m == move:
                    frame[top + 5:top + cell - 5, m * cell + 5:(m + 1) * cell - 5] = (220, 40, 40)
            bar0, width = (n + 1) * cell, 3 * cell - 4
            frame[top + cell // 2, bar0:bar0 + width] = (0, 0, 0)
            for value, color in ((float(force[i]), (40, 180, 40)), (pushed, (220, 40, 40))):
                x = bar0 + int(round((np.clip(value, -1, 1) + 1) / 2 * (width - 1)))
                frame[top + 2:top + cell - 2, x] = color
        return frame


def parallel_env(**kwargs) -> Aim:
    return Aim(**kwargs)

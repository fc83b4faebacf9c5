"""Generalised advantage estimation over ``[T, E, k]`` sequences (see ``data.rollout``).

Each ``(e, j)`` column is one agent's sequence of transitions in time order. The chain of
advantages runs back along it and stops where the agent's episode ended or a new one began
(``follows`` false). A terminated transition has no future value; every other one bootstraps
on ``next_value``: the next cell's value where the sequence goes on, ``V(next_obs)`` where it
does not (a truncated episode, or the rollout's last transition of an episode that goes on).
"""

from __future__ import annotations

import numpy as np


def gae(reward: np.ndarray, value: np.ndarray, next_value: np.ndarray, terminated: np.ndarray,
        follows: np.ndarray, gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns (advantage + value), all ``[T, ...]``: time first, then any
    number of sequence axes. Cells that hold no transition may hold anything, as long as
    ``follows`` is false into them."""
    delta = reward + gamma * np.where(terminated, 0.0, next_value) - value
    adv = np.zeros(delta.shape, np.float64)
    carry = np.zeros(delta.shape[1:], np.float64)
    for t in range(delta.shape[0] - 1, -1, -1):
        carry = delta[t] + gamma * lam * np.where(follows[t], carry, 0.0)
        adv[t] = carry
    return adv, adv + value

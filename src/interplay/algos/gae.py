"""Generalised advantage estimation over transitions from many streams at once.

A stream is one agent in one env copy; its transitions arrive in order but interleaved with
other streams' (and, in turn-based envs, with gaps between an agent's turns). The chain of
advantages runs back through a stream and stops where an episode ended for that agent. A
terminated transition has no future value; a truncated one bootstraps on ``V(next_obs)``, as
does the last transition of a stream in the batch when its episode goes on.
"""

from __future__ import annotations

import numpy as np


def gae(reward: np.ndarray, value: np.ndarray, next_value: np.ndarray, terminated: np.ndarray,
        truncated: np.ndarray, stream: np.ndarray, gamma: float,
        lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns (advantage + value) for rows ``[n]`` in arrival order.

    ``value`` is ``V(obs)`` and ``next_value`` is ``V(next_obs)`` of each row; ``stream``
    names the row's stream (any integer id).
    """
    n = reward.shape[0]
    delta = reward + gamma * np.where(terminated, 0.0, next_value) - value
    nxt, order, position = _streams(stream)
    chained = (nxt >= 0) & ~(terminated | truncated)
    # Rows by position in their stream: all the rows at one position go back in one step.
    by_position = order[np.argsort(position, kind="stable")]
    bounds = np.searchsorted(np.sort(position), np.arange(int(position.max(initial=-1)) + 2))
    adv = np.zeros(n, np.float64)
    for p in range(len(bounds) - 2, -1, -1):
        rows = by_position[bounds[p]:bounds[p + 1]]
        carry = np.where(chained[rows], adv[nxt[rows]], 0.0)
        adv[rows] = delta[rows] + gamma * lam * carry
    return adv, adv + value


def next_in_stream(stream: np.ndarray) -> np.ndarray:
    """For each row, the index of the next row of its stream, or -1 for a stream's last."""
    return _streams(stream)[0]


def _streams(stream: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's successor in its stream (-1 if none), rows grouped by stream, and each
    row's position within its stream."""
    n = stream.shape[0]
    order = np.argsort(stream, kind="stable")  # grouped by stream, arrival order within
    grouped = stream[order]
    starts = np.r_[True, grouped[1:] != grouped[:-1]] if n else np.zeros(0, bool)
    position = np.arange(n) - np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    follows = np.r_[~starts[1:], False] if n else np.zeros(0, bool)
    nxt = np.full(n, -1)
    nxt[order[follows]] = order[np.flatnonzero(follows) + 1]
    return nxt, order, position

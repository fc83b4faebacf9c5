"""Generalised advantage estimation over transitions from many streams at once.

A stream is one agent in one env copy; its transitions arrive in order but interleaved with
other streams' (and, in turn-based envs, with gaps between an agent's turns). The chain of
advantages runs back through a stream and stops where an episode ended for that agent. A
terminated transition has no future value; a truncated one bootstraps on ``V(next_obs)``, as
does the last transition of a stream in the batch when its episode goes on.
"""

from __future__ import annotations

import numpy as np

from interplay.run.transitions import stream_order


def gae(reward: np.ndarray, value: np.ndarray, next_value: np.ndarray, terminated: np.ndarray,
        truncated: np.ndarray, stream: np.ndarray, gamma: float,
        lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns (advantage + value) for rows ``[n]`` in arrival order.

    ``value`` is ``V(obs)`` and ``next_value`` is ``V(next_obs)`` of each row; ``stream``
    names the row's stream (any integer id).
    """
    n = reward.shape[0]
    delta = reward + gamma * np.where(terminated, 0.0, next_value) - value
    nxt, position = stream_order(stream)
    chained = (nxt >= 0) & ~(terminated | truncated)
    # Rows by position in their stream: all the rows at one position go back in one step.
    by_position = np.argsort(position, kind="stable")
    bounds = np.searchsorted(np.sort(position), np.arange(int(position.max(initial=-1)) + 2))
    adv = np.zeros(n, np.float64)
    for p in range(len(bounds) - 2, -1, -1):
        rows = by_position[bounds[p]:bounds[p + 1]]
        carry = np.where(chained[rows], adv[nxt[rows]], 0.0)
        adv[rows] = delta[rows] + gamma * lam * carry
    return adv, adv + value


"""Sequences drawn from a replay buffer, for learners with recurrent networks (R2D2's way).

A replay buffer links each row to the previous and next rows of its stream (an agent's own
turns, or one env copy's joint rows) within one episode. A sequence is drawn at a row: up to
``burn_in`` rows before it in its episode warm the recurrent state without a loss, then it and
up to ``length - 1`` rows after it are learned from. Sequences start at their first row
(burn-in first), so the state stored with that row is where unrolling begins; a sequence that
its episode ends before filling is padded at the end, the padding marked not ``valid``. No
sequence ever holds rows of two episodes: the links stop where an episode ends or starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


class Linked(Protocol):
    """A replay buffer whose rows know their neighbours by serial number."""

    capacity: int
    serial: np.ndarray  # [capacity] which added row sits at each position
    next: np.ndarray  # [capacity] serial of the stream's next row, or -1
    prev: np.ndarray  # [capacity] serial of the stream's previous row, or -1


@dataclass
class Windows:
    """Positions of ``B`` sequences of ``L`` cells in a buffer, time first."""

    pos: np.ndarray  # [L, B] a valid cell's row; a padded cell repeats its sequence's last row
    valid: np.ndarray  # [L, B] bool: the cell holds a row of the sequence
    learn: np.ndarray  # [L, B] bool: a valid cell past the burn-in, which carries a loss
    start: np.ndarray  # [B] the row each sequence was drawn at (its first learned cell)


def _step(buffer: Linked, links: np.ndarray, pos: np.ndarray,
          ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One link along ``links`` from ``pos`` where ``ok``: the new positions and which moved."""
    serial = links[pos]
    npos = serial % buffer.capacity
    moved = ok & (serial >= 0) & (buffer.serial[npos] == serial)
    return np.where(moved, npos, pos), moved


def windows(buffer: Linked, start: np.ndarray, burn_in: int, length: int) -> Windows:
    """The sequences drawn at rows ``start``: up to ``burn_in`` rows before each in its
    episode, then up to ``length`` rows from it on, left-aligned in ``burn_in + length``
    cells."""
    start = np.asarray(start, np.int64)
    first, back = start.copy(), np.zeros(len(start), np.int64)
    ok = np.ones(len(start), bool)
    for _ in range(burn_in):
        first, ok = _step(buffer, buffer.prev, first, ok)
        back += ok
    cells = burn_in + length
    pos = np.empty((cells, len(start)), np.int64)
    valid = np.zeros((cells, len(start)), bool)
    pos[0], valid[0] = first, True
    ok = np.ones(len(start), bool)
    for t in range(1, cells):
        pos[t], ok = _step(buffer, buffer.next, pos[t - 1], ok & (t < back + length))
        valid[t] = ok
    learn = valid & (np.arange(cells)[:, None] >= back[None, :])
    return Windows(pos, valid, learn, start)

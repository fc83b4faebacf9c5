"""Teachers for tests/test_teacher.py (``algo.teacher: teachers:first_legal``)."""

from __future__ import annotations

import numpy as np

CALLS = [0]  # how often first_legal was asked


def first_legal(observation, agent_id):
    """The lowest-numbered legal action."""
    CALLS[0] += 1
    return int(np.flatnonzero(observation["action_mask"])[0])


def broken(observation, agent_id):
    raise KeyError("no such square")


def off_the_board(observation, agent_id):
    return 99


def corner_when_open(observation, agent_id):
    """Square 0 where it is free; no advice anywhere else."""
    return 0 if observation["action_mask"][0] else None


def silent(observation, agent_id):
    return None


def corners(observation, agent_id):
    """The free corners, equally good; no advice where none is free."""
    free = [c for c in (0, 2, 6, 8) if observation["action_mask"][c]]
    return free or None


def a_taken_square(observation, agent_id):
    taken = [c for c in range(9) if not observation["action_mask"][c]]
    return taken[0] if taken else None


EARLY = [0]  # how many more moves first_legal_early advises on


def first_legal_early(observation, agent_id):
    """The lowest-numbered legal action for the first ``EARLY[0]`` moves asked, then silent."""
    if EARLY[0] <= 0:
        return None
    EARLY[0] -= 1
    return int(np.flatnonzero(observation["action_mask"])[0])

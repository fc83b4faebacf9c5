"""A scripted policy and a callback in a local module (not an installed package)."""

from __future__ import annotations

from interplay.run.callbacks import Callbacks


def first_action(observation, agent_id):
    return 0


class Quiet(Callbacks):
    pass

"""Bookkeeping of a run: the runner, turns and transitions, episodes, policy mapping, actors."""

"""Per-episode policy mapping functions for tests/test_episode_mapping.py (RLlib's signature)."""

from __future__ import annotations

CALLS: list[tuple[str, int, int]] = []  # (agent, episode id, copy) of every call
GIVEN: dict[tuple[int, int], dict[str, str]] = {}  # (copy, its episode number) -> agent -> policy
_SEEN: dict[int, list[int]] = {}  # copy -> the episode ids it was asked about, in order


def reset() -> None:
    CALLS.clear()
    GIVEN.clear()
    _SEEN.clear()


def learner_on_a_random_seat(agent_id, episode, **kwargs):
    """RLlib's self-play example: the learner takes a seat drawn per episode, a random player
    the other."""
    CALLS.append((agent_id, episode.id_, episode.env_index))
    ids = _SEEN.setdefault(episode.env_index, [])
    if episode.id_ not in ids:
        ids.append(episode.id_)
    seats = sorted(episode.user_data.setdefault("seats", ["player_1", "player_2"]))
    if "learner" not in episode.user_data:
        episode.user_data["learner"] = seats[int(episode.rng.integers(2))]
    pid = "main" if agent_id == episode.user_data["learner"] else "rand"
    GIVEN.setdefault((episode.env_index, len(ids)), {})[agent_id] = pid
    return pid


def late_ghost(agent_id, episode, **kwargs):
    """A known policy for the first episodes, then one the run does not have."""
    return "ghost" if episode.id_ >= 12 else "shared"


def swaps_spaces(agent_id, episode, **kwargs):
    """Each agent on its own policy, until episode 12 puts the b agent on a's policy."""
    if agent_id.startswith("b") and episode.id_ < 12:
        return "pb"
    return "pa"

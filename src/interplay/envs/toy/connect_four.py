"""Scripted connect four players that look ahead: opponents in a league's pool
(``league.fixed: [interplay.envs.connect_four:one_ply]``) and yardsticks for a trained policy:

    interplay eval RUN_DIR --vs interplay.envs.connect_four:one_ply --episodes 500
    interplay eval RUN_DIR --vs interplay.envs.connect_four:two_ply --episodes 500

``one_ply`` wins at once when it can, else blocks a column where the other player would win at
once, else plays a random legal column. ``two_ply`` does the same, but among the remaining
columns avoids those that let the other player win at once on top of its piece.
``center_one_ply`` and ``center_two_ply`` look ahead as those do, but where they would pick at
random they take the column nearest the centre: positional players, and deterministic ones
(``eval --vs ... --opening K`` varies their games). Each takes
PettingZoo's connect four observation (``observation``: 6x7x2 planes, the mover's pieces
first; ``action_mask``) and the agent id, and returns a column. Their random choices come from
NumPy's global generator, which a run seeds and checkpoints, so a league with them resumes
exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

ROWS, COLS = 6, 7


def _wins(board: np.ndarray) -> bool:
    """Four in a row anywhere on one player's 6x7 plane."""
    b = board.astype(bool)
    h = b[:, :-3] & b[:, 1:-2] & b[:, 2:-1] & b[:, 3:]
    v = b[:-3] & b[1:-2] & b[2:-1] & b[3:]
    d = b[:-3, :-3] & b[1:-2, 1:-2] & b[2:-1, 2:-1] & b[3:, 3:]
    a = b[3:, :-3] & b[2:-1, 1:-2] & b[1:-2, 2:-1] & b[:-3, 3:]
    return bool(h.any() or v.any() or d.any() or a.any())


def _drop(mine: np.ndarray, theirs: np.ndarray, col: int) -> tuple[int, int] | None:
    """Where a piece dropped in ``col`` lands (row 0 is the top), or None if it is full."""
    filled = mine[:, col] + theirs[:, col]
    empty = np.flatnonzero(filled == 0)
    return None if len(empty) == 0 else (int(empty[-1]), col)


def _winning_columns(player: np.ndarray, other: np.ndarray) -> list[int]:
    out = []
    for col in range(COLS):
        cell = _drop(player, other, col)
        if cell is not None:
            trial = player.copy()
            trial[cell] = 1
            if _wins(trial):
                out.append(col)
    return out


def _planes(observation: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    planes = np.asarray(observation["observation"])
    return planes[:, :, 0], planes[:, :, 1], np.asarray(observation["action_mask"]).astype(bool)


def _forced(mine: np.ndarray, theirs: np.ndarray, legal: np.ndarray) -> int | None:
    """A column that wins at once, else one that blocks the other player's win, else None."""
    for options in (_winning_columns(mine, theirs), _winning_columns(theirs, mine)):
        options = [c for c in options if legal[c]]
        if options:
            return options[0]
    return None


_CENTRE_FIRST = (3, 2, 4, 1, 5, 0, 6)


def _random(columns: list[int]) -> int:
    return int(np.random.choice(columns))


def _central(columns: list[int]) -> int:
    return min(columns, key=_CENTRE_FIRST.index)


def _safe(mine: np.ndarray, theirs: np.ndarray, legal: np.ndarray) -> list[int]:
    """The legal columns that do not let the other player win at once on top of the piece
    (all legal columns when every one does)."""
    safe = []
    for col in np.flatnonzero(legal):
        cell = _drop(mine, theirs, int(col))
        assert cell is not None
        after = mine.copy()
        after[cell] = 1
        if not _winning_columns(theirs, after):
            safe.append(int(col))
    return safe or np.flatnonzero(legal).tolist()


def _player(observation: dict, careful: bool, pick: Callable[[list[int]], int]) -> int:
    mine, theirs, legal = _planes(observation)
    forced = _forced(mine, theirs, legal)
    if forced is not None:
        return forced
    return pick(_safe(mine, theirs, legal) if careful else np.flatnonzero(legal).tolist())


def one_ply(observation: dict, agent_id: str) -> int:
    return _player(observation, False, _random)


def two_ply(observation: dict, agent_id: str) -> int:
    return _player(observation, True, _random)


def center_one_ply(observation: dict, agent_id: str) -> int:
    return _player(observation, False, _central)


def center_two_ply(observation: dict, agent_id: str) -> int:
    return _player(observation, True, _central)


def _lines_through(plane: np.ndarray, cell: tuple[int, int]) -> str:
    """The directions of the rows of four or more ``plane`` holds through ``cell``: ``h``
    (horizontal), ``v`` (vertical), ``d`` (down to the right), ``a`` (up to the right)."""
    found = ""
    for name, (dr, dc) in (("h", (0, 1)), ("v", (1, 0)), ("d", (1, 1)), ("a", (-1, 1))):
        run = 1
        for sign in (1, -1):
            r, c = cell[0] + sign * dr, cell[1] + sign * dc
            while 0 <= r < ROWS and 0 <= c < COLS and plane[r, c]:
                run += 1
                r, c = r + sign * dr, c + sign * dc
        if run >= 4:
            found += name
    return found


def move_kind(observation: dict, column: int) -> str:
    """What playing ``column`` does in the position ``observation`` (the mover's view), by the
    first of these that holds: ``win`` or ``missed_win`` (the mover could win at once),
    ``two_threats`` (the other player has two winning columns: no move stops both),
    ``block_<dirs>`` or ``missed_block_<dirs>`` (it has one, a row of four in the directions
    ``dirs``, see :func:`_lines_through`), ``gives_win`` (the piece lets it win on top), else
    ``quiet``. Used to tally a policy's tactical mistakes
    (``benchmarks/connect_four_tactics.py``)."""
    mine, theirs, legal = _planes(observation)
    wins = [c for c in _winning_columns(mine, theirs) if legal[c]]
    if wins:
        return "win" if column in wins else "missed_win"
    threats = [c for c in _winning_columns(theirs, mine) if legal[c]]
    if len(threats) > 1:
        return "two_threats"
    if threats:
        cell = _drop(theirs, mine, threats[0])
        assert cell is not None
        after = theirs.copy()
        after[cell] = 1
        dirs = _lines_through(after, cell)
        return f"block_{dirs}" if column == threats[0] else f"missed_block_{dirs}"
    cell = _drop(mine, theirs, column)
    if cell is None:
        raise ValueError(f"column {column} is full")
    after = mine.copy()
    after[cell] = 1
    return "gives_win" if _winning_columns(theirs, after) else "quiet"

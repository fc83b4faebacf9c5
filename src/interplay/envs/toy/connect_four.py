"""Scripted connect four players that look ahead: opponents in a league's pool
(``league.fixed: [interplay.envs.connect_four:one_ply]``) and yardsticks for a trained policy:

    interplay eval RUN_DIR --vs interplay.envs.connect_four:one_ply --episodes 500
    interplay eval RUN_DIR --vs interplay.envs.connect_four:two_ply --episodes 500

``one_ply`` wins at once when it can, else blocks a column where the other player would win at
once, else plays a random legal column. ``two_ply`` does the same, but among the remaining
columns avoids those that let the other player win at once on top of its piece.
``center_one_ply`` and ``center_two_ply`` look ahead as those do, but where they would pick at
random they take the column nearest the centre: positional players, and deterministic ones
(``eval --vs ... --opening K`` varies their games). ``forced`` and ``tactics`` are no players
but teachers (``algo.teacher``): ``forced`` advises the winning or blocking column, ``tactics``
also the columns that hand over no win on top where some would, and ``threats`` looks one move
further (the columns that make two threats at once, else those after which the other player
cannot); ``lookahead`` searches six moves ahead (the columns that force four in a row within
them, else those after which the other player cannot force it); elsewhere they give no advice
(None). Each takes
PettingZoo's connect four observation (``observation``: 6x7x2 planes, the mover's pieces
first; ``action_mask``) and the agent id, and returns a column. Their random choices come from
NumPy's global generator, which a run seeds and checkpoints, so a league with them resumes
exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

ROWS, COLS = 6, 7


# A board as bits: cell (row r from the top, column c) is bit 7c + (5 - r), each column seven
# bits from the bottom up, the seventh always clear so that no row of four wraps round.
_WEIGHTS = np.array([[1 << (7 * c + ROWS - 1 - r) for c in range(COLS)] for r in range(ROWS)],
                    np.int64).ravel()
_COLUMN = (1 << ROWS) - 1


def _bits(plane: np.ndarray) -> int:
    """One player's 6x7 plane as bits."""
    return int((np.asarray(plane).ravel() != 0) @ _WEIGHTS)


def _four(bits: int) -> bool:
    """Four in a row anywhere: vertical, horizontal, then the two diagonals."""
    for step in (1, 7, 6, 8):
        pairs = bits & (bits >> step)
        if pairs & (pairs >> 2 * step):
            return True
    return False


def _drop(both: int, col: int) -> int:
    """The bit where a piece dropped in ``col`` lands (its lowest empty cell), 0 if it is full."""
    free = ~(both >> 7 * col) & _COLUMN
    return (free & -free) << 7 * col


_BOTTOM = sum(1 << 7 * c for c in range(COLS))
_BOARD = _BOTTOM * _COLUMN


def _threat_cells(player: int, both: int) -> int:
    """The empty cells that would give ``player`` four in a row, playable now or not."""
    cells = (player << 1) & (player << 2) & (player << 3)  # vertical: only on top
    for step in (7, 6, 8):
        up, down = (player << step) & (player << 2 * step), (player >> step) & (player >> 2 * step)
        cells |= (up & ((player << 3 * step) | (player >> step))
                  | down & ((player << step) | (player >> 3 * step)))
    return cells & _BOARD & ~both


def _wins_now(player: int, both: int) -> int:
    """The cells where ``player`` would make four in a row with its next piece."""
    return _threat_cells(player, both) & (both + _BOTTOM)


def _winning_columns(player: int, other: int) -> list[int]:
    """The columns where ``player`` would make four in a row at once."""
    cells = _wins_now(player, player | other)
    return [col for col in range(COLS) if cells >> 7 * col & _COLUMN]


def _planes(observation: dict) -> tuple[int, int, np.ndarray]:
    """The mover's and the other player's pieces as bits, and the legal columns."""
    planes = np.asarray(observation["observation"])
    return (_bits(planes[:, :, 0]), _bits(planes[:, :, 1]),
            np.asarray(observation["action_mask"]).astype(bool))


def _forced(mine: int, theirs: int, legal: np.ndarray) -> int | None:
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


def _safe(mine: int, theirs: int, legal: np.ndarray) -> list[int]:
    """The legal columns that do not let the other player win at once on top of the piece
    (all legal columns when every one does)."""
    both = mine | theirs
    safe = [int(col) for col in np.flatnonzero(legal)
            if not _winning_columns(theirs, mine | _drop(both, int(col)))]
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


def forced(observation: dict, agent_id: str) -> int | None:
    """The column that wins at once, else the one that blocks the other player's win at once,
    else None: a teacher with advice only where a move is forced (``algo.teacher``)."""
    return _forced(*_planes(observation))


def tactics(observation: dict, agent_id: str) -> int | list[int] | None:
    """A teacher (``algo.teacher``) with advice where one move ahead decides: the column that
    wins at once, else the one that blocks the other player's win at once, else the columns
    that do not let the other player win at once on top of the piece where some do, else
    None."""
    mine, theirs, legal = _planes(observation)
    move = _forced(mine, theirs, legal)
    if move is not None:
        return move
    safe = _safe(mine, theirs, legal)
    return safe if len(safe) < int(legal.sum()) else None


def _makes_two(player: int, both: int) -> bool:
    """Whether ``player`` (not to move) has two threats no single move stops: two playable
    winning cells, or one with another right on top of it."""
    now = _wins_now(player, both)
    return bool(now & (now - 1) or (now << 1) & _threat_cells(player, both))


def _sound(mine: int, theirs: int, columns: list[int]) -> list[int]:
    """Of ``columns`` (none hands over a win on top), those that make two threats at once
    where some do; else those after which the other player cannot make two."""
    both = mine | theirs
    after = {col: _drop(both, col) for col in columns}
    forks = [col for col, cell in after.items() if _makes_two(mine | cell, both | cell)]
    if forks:
        return forks
    sound = []
    for col, cell in after.items():
        mine2, both2 = mine | cell, both | cell
        if _wins_now(mine2, both2):
            sound.append(col)  # a threat of its own: the reply is forced
            continue
        replies = (both2 + _BOTTOM) & _BOARD
        while replies:
            reply = replies & -replies
            replies ^= reply
            both3 = both2 | reply
            if _makes_two(theirs | reply, both3) and not _wins_now(mine2, both3):
                break
        else:
            sound.append(col)
    return sound


def threats(observation: dict, agent_id: str) -> int | list[int] | None:
    """A teacher (``algo.teacher``) that looks a move further than :func:`tactics`: the
    winning column, else the blocking one; else, of the columns that hand over no win on top,
    those that make two threats at once where some do, else those after which the other
    player cannot make two, where that leaves out some legal column; else None."""
    mine, theirs, legal = _planes(observation)
    move = _forced(mine, theirs, legal)
    if move is not None:
        return move
    safe = _safe(mine, theirs, legal)
    sound = _sound(mine, theirs, safe) or safe
    return sound if len(sound) < int(legal.sum()) else None


LOOKAHEAD_PLIES = 6
_COLUMNS = [_COLUMN << 7 * c for c in range(COLS)]


def _outcome(mine: int, theirs: int, plies: int, alpha: int = -1, beta: int = 1) -> int:
    """1 if the player to move (``mine``) can force four in a row within ``plies`` moves (its
    own and the other player's counted together), -1 if the other player can, else 0: a
    negamax with alpha-beta over the three outcomes, that plays forced blocks only and never a
    piece that lets the other player win on top."""
    both = mine | theirs
    playable = (both + _BOTTOM) & _BOARD
    if _threat_cells(mine, both) & playable:
        return 1
    if plies <= 1 or not playable:
        return 0
    threat = _threat_cells(theirs, both)
    blocks = threat & playable
    if blocks:
        if blocks & (blocks - 1):
            return -1  # two winning cells: one block cannot stop both
        playable = blocks
    playable &= ~(threat >> 1)  # not under a cell where the other player would win
    if not playable:
        return -1
    if plies <= 2:
        return 0
    best = -1
    for col in _CENTRE_FIRST:
        cell = playable & _COLUMNS[col]
        if cell:
            best = max(best, -_outcome(theirs, mine | cell, plies - 1, -beta, -alpha))
            alpha = max(alpha, best)
            if alpha >= beta:
                break
    return best


def lookahead(observation: dict, agent_id: str) -> list[int] | None:
    """A teacher (``algo.teacher``) that searches :data:`LOOKAHEAD_PLIES` moves ahead (its own
    and the other player's): the columns that force four in a row within them where some do,
    else those after which the other player cannot force it, where that leaves out some legal
    column; else None. It sees all that :func:`threats` sees (a win or a block is two moves,
    two threats at once three or four) and a little further."""
    mine, theirs, legal = _planes(observation)
    both = mine | theirs
    wins = _threat_cells(mine, both)
    values = {}
    for col in np.flatnonzero(legal).tolist():
        cell = _drop(both, col)
        values[col] = 1 if wins & cell else -_outcome(theirs, mine | cell, LOOKAHEAD_PLIES - 1)
    best = max(values.values(), default=0)
    advised = [col for col, value in values.items() if value == best]
    return advised if len(advised) < len(values) else None


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
    both = mine | theirs
    if threats:
        cell = _drop(both, threats[0])
        dirs = _lines_through(_plane(theirs | cell), _cell(cell))
        return f"block_{dirs}" if column == threats[0] else f"missed_block_{dirs}"
    cell = _drop(both, column)
    if not cell:
        raise ValueError(f"column {column} is full")
    return "gives_win" if _winning_columns(theirs, mine | cell) else "quiet"


def _plane(bits: int) -> np.ndarray:
    """Bits as a 6x7 plane (row 0 the top)."""
    return ((bits & _WEIGHTS) != 0).reshape(ROWS, COLS)


def _cell(bit: int) -> tuple[int, int]:
    """The (row from the top, column) of one bit."""
    col, height = divmod(bit.bit_length() - 1, 7)
    return ROWS - 1 - height, col

"""The scripted connect four players: they take a win, block one, and (two-ply) never hand one over."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.classic import connect_four_v3

from interplay.envs.toy.connect_four import (
    _drop,
    _four,
    _outcome,
    _plane,
    _threat_cells,
    center_one_ply,
    center_two_ply,
    forced,
    lookahead,
    move_kind,
    one_ply,
    tactics,
    threats,
    two_ply,
)

PLAYERS = [one_ply, two_ply, center_one_ply, center_two_ply]


def position(mine: list[tuple[int, int]], theirs: list[tuple[int, int]]) -> dict:
    """An observation for the mover; cells are (row, column), row 5 the bottom."""
    planes = np.zeros((6, 7, 2), np.int8)
    for r, c in mine:
        planes[r, c, 0] = 1
    for r, c in theirs:
        planes[r, c, 1] = 1
    legal = (planes.sum(axis=2)[0] == 0).astype(np.int8)
    return {"observation": planes, "action_mask": legal}


@pytest.mark.parametrize("player", PLAYERS)
def test_a_player_takes_a_win_before_blocking_one(player):
    obs = position(mine=[(5, 0), (5, 1), (5, 2)], theirs=[(4, 0), (4, 1), (4, 2)])
    assert all(player(obs, "player_0") == 3 for _ in range(20))


@pytest.mark.parametrize("player", PLAYERS)
def test_a_player_blocks_the_other_players_win(player):
    obs = position(mine=[(5, 0), (5, 1), (5, 6)], theirs=[(5, 3), (4, 3), (3, 3)])
    assert all(player(obs, "player_1") == 3 for _ in range(20))


def test_two_ply_does_not_play_under_the_other_players_win():
    # the other player's three in row 4 wins at (4, 1) or (4, 5) once a piece lies below it
    obs = position(mine=[(5, 2), (5, 4)], theirs=[(5, 3), (4, 2), (4, 3), (4, 4)])
    picks = {two_ply(obs, "player_0") for _ in range(200)}
    assert picks == {0, 2, 3, 4, 6}
    assert {one_ply(obs, "player_0") for _ in range(200)} >= {1, 5}


def test_the_forced_teacher_advises_a_win_then_a_block_and_else_nothing():
    assert forced(position([(5, 0), (5, 1), (5, 2)], [(4, 0), (4, 1), (4, 2)]), "player_0") == 3
    assert forced(position([(5, 0), (5, 1), (5, 6)], [(5, 3), (4, 3), (3, 3)]), "player_1") == 3
    assert forced(position([(5, 2), (5, 4)], [(5, 3), (4, 2), (4, 3), (4, 4)]), "player_0") is None


def test_the_tactics_teacher_also_names_the_columns_that_hand_over_no_win():
    assert tactics(position([(5, 0), (5, 1), (5, 2)], [(4, 0), (4, 1), (4, 2)]), "player_0") == 3
    under = position([(5, 2), (5, 4)], [(5, 3), (4, 2), (4, 3), (4, 4)])
    assert tactics(under, "player_0") == [0, 2, 3, 4, 6]
    assert tactics(position([], []), "player_0") is None  # every column is as safe


def test_the_threats_teacher_makes_two_threats_and_stops_the_other_players_two():
    # the mover's two in the bottom row, open at both ends: a third piece beside them makes
    # two winning cells at once
    assert threats(position([(5, 2), (5, 3)], [(4, 2), (4, 3)]), "player_0") == [1, 4]
    # the other player's: only a piece beside them stops it making two next move
    assert threats(position([(4, 2), (4, 3)], [(5, 2), (5, 3)]), "player_0") == [1, 4]
    assert threats(position([(5, 0), (5, 1), (5, 2)], [(4, 0), (4, 1), (4, 2)]), "player_0") == 3
    under = position([(5, 2), (5, 4)], [(5, 3), (4, 2), (4, 3), (4, 4)])
    assert threats(under, "player_0") == [0, 2, 3, 4, 6]  # as tactics: nothing further ahead
    assert threats(position([], []), "player_0") is None


def _random_positions(n: int, seed: int, least: int = 0, most: int = 30
                      ) -> list[tuple[int, int]]:
    """``n`` positions (the mover's pieces, the other player's) after ``least`` to ``most``
    random moves, stopped before any move that would make four in a row."""
    rng, out = np.random.default_rng(seed), []
    for _ in range(n):
        mine = theirs = 0
        for _ in range(int(rng.integers(least, most))):
            both = mine | theirs
            cell = _drop(both, int(rng.choice([c for c in range(7) if _drop(both, c)])))
            if _four(mine | cell):
                break
            mine, theirs = theirs, mine | cell
        out.append((mine, theirs))
    return out


def test_the_threat_cells_are_the_empty_cells_that_make_four():
    for mine, theirs in _random_positions(300, seed=0):
        both = mine | theirs
        empty = [1 << (7 * c + h) for c in range(7) for h in range(6) if not both >> (7 * c + h) & 1]
        want = sum(b for b in empty if _four(mine | b))
        assert _threat_cells(mine, both) == want


def test_the_centre_players_take_the_column_nearest_the_centre_they_may():
    assert center_one_ply(position([], []), "player_0") == 3
    # the centre column full: the next nearest, the left one first
    full = [(r, 3) for r in range(0, 6, 2)], [(r, 3) for r in range(1, 6, 2)]
    assert center_one_ply(position(*full), "player_0") == 2
    # columns 2-4 full, the other player's three in row 4: a piece in column 1 or 5 lets it
    # win on top, so the careful one goes to the edge
    obs = position(mine=[(0, 2), (1, 2), (1, 3), (1, 4), (2, 4), (3, 2), (3, 3), (5, 3), (5, 4)],
                   theirs=[(0, 3), (0, 4), (2, 2), (2, 3), (3, 4), (4, 2), (4, 3), (4, 4), (5, 2)])
    assert center_one_ply(obs, "player_0") == 1
    assert center_two_ply(obs, "player_0") == 0


def test_one_ply_beats_random_moves_in_real_games():
    env = connect_four_v3.env()
    rng = np.random.default_rng(0)
    wins = 0
    for game in range(40):
        env.reset(seed=game)
        scripted = env.possible_agents[game % 2]
        for agent in env.agent_iter():
            obs, reward, term, trunc, _ = env.last()
            if term or trunc:
                if agent == scripted and reward > 0:
                    wins += 1
                env.step(None)
                continue
            move = one_ply(obs, agent) if agent == scripted else int(
                rng.choice(np.flatnonzero(obs["action_mask"])))
            env.step(move)
    assert wins >= 32


def test_move_kind_names_the_tactic_a_move_takes_or_misses():
    obs = position(mine=[(5, 0), (5, 1), (5, 2)], theirs=[(4, 0), (4, 1), (4, 2)])
    assert (move_kind(obs, 3), move_kind(obs, 4)) == ("win", "missed_win")
    column = position(mine=[(5, 0), (5, 1), (5, 6)], theirs=[(5, 3), (4, 3), (3, 3)])
    assert (move_kind(column, 3), move_kind(column, 0)) == ("block_v", "missed_block_v")
    row = position(mine=[(5, 0), (4, 0)], theirs=[(5, 1), (5, 2), (5, 4)])
    assert (move_kind(row, 3), move_kind(row, 6)) == ("block_h", "missed_block_h")
    # the other player's (5,1) (4,2) (3,3) win up to the right at (2,4), which is playable
    rising = position(mine=[(5, 0), (5, 2), (4, 3), (5, 4), (3, 4)],
                      theirs=[(5, 1), (4, 2), (3, 3), (5, 3), (4, 4)])
    assert (move_kind(rising, 4), move_kind(rising, 6)) == ("block_a", "missed_block_a")
    both = position(mine=[(5, 0), (4, 0)], theirs=[(5, 2), (5, 3), (5, 4)])
    assert move_kind(both, 1) == move_kind(both, 5) == "two_threats"
    under = position(mine=[(5, 2), (5, 4)], theirs=[(5, 3), (4, 2), (4, 3), (4, 4)])
    assert (move_kind(under, 1), move_kind(under, 0)) == ("gives_win", "quiet")
    full = position(mine=[(r, 3) for r in range(0, 6, 2)], theirs=[(r, 3) for r in range(1, 6, 2)])
    with pytest.raises(ValueError, match="column 3 is full"):
        move_kind(full, 3)


def _full_width(mine: int, theirs: int, plies: int) -> int:
    """The outcome within ``plies`` moves by trying every move: what ``_outcome`` prunes."""
    cells = [cell for cell in (_drop(mine | theirs, col) for col in range(7)) if cell]
    if not plies or not cells:
        return 0
    if any(_four(mine | cell) for cell in cells):
        return 1
    return max(-_full_width(theirs, mine | cell, plies - 1) for cell in cells)


def test_the_lookahead_search_finds_what_trying_every_move_finds():
    found = set()
    for mine, theirs in _random_positions(60, seed=1, least=4, most=36):
        for plies in (1, 2, 3, 4):
            value = _outcome(mine, theirs, plies)
            assert value == _full_width(mine, theirs, plies), (mine, theirs, plies)
            found.add(value)
    for mine, theirs in _random_positions(8, seed=3, least=4, most=36):
        assert _outcome(mine, theirs, 5) == _full_width(mine, theirs, 5), (mine, theirs)
    assert found == {-1, 0, 1}  # the positions hold wins, losses and open games


def test_the_lookahead_teacher_sees_what_threats_sees_and_further():
    assert lookahead(position([(5, 2), (5, 3)], [(4, 2), (4, 3)]), "player_0") == [1, 4]
    assert lookahead(position([(4, 2), (4, 3)], [(5, 2), (5, 3)]), "player_0") == [1, 4]
    assert lookahead(position([(5, 0), (5, 1), (5, 2)], [(4, 0), (4, 1), (4, 2)]),
                     "player_0") == [3]
    assert lookahead(position([], []), "player_0") is None
    # elsewhere: the columns with the best outcome six moves ahead
    deeper = 0
    for mine, theirs in _random_positions(150, seed=2, least=4, most=36):
        planes = np.stack([_plane(mine), _plane(theirs)], axis=2)
        obs = {"observation": planes.astype(np.int8),
               "action_mask": (planes.sum(axis=2)[0] == 0).astype(np.int8)}
        told, shallow = lookahead(obs, "player_0"), threats(obs, "player_0")
        legal = np.flatnonzero(obs["action_mask"]).tolist()
        after = {c: mine | _drop(mine | theirs, c) for c in legal}
        values = {c: 1 if _four(after[c]) else -_outcome(theirs, after[c], 5) for c in legal}
        best = [c for c in legal if values[c] == max(values.values())]
        assert told == (best if len(best) < len(legal) else None)
        deeper += told is not None and shallow is not None and set(told) < set(
            np.atleast_1d(shallow).tolist())
    assert deeper  # some positions where it rules out columns threats still allows

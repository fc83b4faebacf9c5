"""Advantages and returns against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from interplay.data.returns import gae

G, L = 0.9, 0.5


def run(rows: list[tuple], gamma: float = G, lam: float = L) -> tuple[np.ndarray, np.ndarray]:
    """rows: (stream, reward, V(obs), V(next_obs), terminated, truncated), in arrival order;
    laid out as ``[T, streams]`` (each stream's rows in order) the way rollouts are."""
    stream, r, v, nv, term, trunc = (np.array(c) for c in zip(*rows, strict=True))
    ids = sorted(set(stream.tolist()))
    col = np.array([ids.index(x) for x in stream.tolist()])
    t = np.array([np.count_nonzero(col[:i] == c) for i, c in enumerate(col)])
    shape = (int(t.max()) + 1, len(ids))

    def grid(x, dtype):
        out = np.zeros(shape, dtype)
        out[t, col] = x
        return out

    valid = grid(True, bool)
    follows = np.zeros(shape, bool)
    follows[:-1] = valid[1:]
    follows &= ~grid(term.astype(bool) | trunc.astype(bool), bool)
    adv, ret = gae(grid(r, float), grid(v, float), grid(nv, float), grid(term, bool), follows,
                   gamma, lam)
    return adv[t, col], ret[t, col]


def test_one_stream_that_goes_on_bootstraps_on_the_last_next_value():
    # V(next_obs) of each row is V(obs) of the next, as the runner delivers them.
    adv, ret = run([(0, 1.0, 2.0, 3.0, 0, 0), (0, 0.0, 3.0, 4.0, 0, 0), (0, 2.0, 4.0, 5.0, 0, 0)])
    d2 = 2.0 + G * 5.0 - 4.0
    d1 = 0.0 + G * 4.0 - 3.0
    d0 = 1.0 + G * 3.0 - 2.0
    a2 = d2
    a1 = d1 + G * L * a2
    a0 = d0 + G * L * a1
    np.testing.assert_allclose(adv, [a0, a1, a2])
    np.testing.assert_allclose(ret, [a0 + 2.0, a1 + 3.0, a2 + 4.0])


def test_termination_does_not_bootstrap_and_cuts_the_chain():
    adv, _ = run([(0, 1.0, 2.0, 7.0, 1, 0), (0, 5.0, 1.0, 1.5, 0, 0)])
    # Row 0 ended by termination: no V(next_obs) (7.0 is ignored), no advantage from row 1.
    np.testing.assert_allclose(adv, [1.0 - 2.0, 5.0 + G * 1.5 - 1.0])


def test_truncation_bootstraps_on_next_obs_but_cuts_the_chain():
    adv, ret = run([(0, 1.0, 2.0, 7.0, 0, 1), (0, 5.0, 1.0, 1.5, 0, 0)])
    a0 = 1.0 + G * 7.0 - 2.0  # the final observation's value, not the next episode's
    np.testing.assert_allclose(adv, [a0, 5.0 + G * 1.5 - 1.0])
    np.testing.assert_allclose(ret[0], a0 + 2.0)


def test_interleaved_streams_chain_only_within_themselves():
    rows = [(3, 1.0, 0.0, 1.0, 0, 0), (8, 2.0, 0.0, 2.0, 0, 0),
            (3, 0.0, 1.0, 0.0, 1, 0), (8, 1.0, 2.0, 3.0, 0, 0)]
    adv, _ = run(rows)
    a3_1 = 0.0 - 1.0
    a3_0 = (1.0 + G * 1.0 - 0.0) + G * L * a3_1
    a8_1 = 1.0 + G * 3.0 - 2.0
    a8_0 = (2.0 + G * 2.0 - 0.0) + G * L * a8_1
    np.testing.assert_allclose(adv, [a3_0, a8_0, a3_1, a8_1])


def test_turn_based_gaps_count_one_discount_per_turn():
    # Streams 0 and 1 alternate turns in one copy: stream 0 closes at steps 0, 2, 4 (with
    # rewards gathered while the other moved); each closed transition is one discount step.
    rows = [(0, 1.0, 0.5, 0.25, 0, 0), (1, -1.0, 0.0, 0.1, 0, 0),
            (0, 0.5, 0.25, 0.0, 0, 0), (1, 2.0, 0.1, 0.0, 1, 0),
            (0, -1.0, 0.0, 0.0, 1, 0)]
    adv, _ = run(rows, gamma=1.0, lam=1.0)
    # gamma = lambda = 1: the advantage is the rest of the stream's rewards minus V(obs).
    np.testing.assert_allclose(adv, [1.0 + 0.5 - 1.0 - 0.5, -1.0 + 2.0 - 0.0,
                                     0.5 - 1.0 - 0.25, 2.0 - 0.1, -1.0 - 0.0])


def test_streams_with_different_lengths_and_an_empty_batch():
    adv, _ = run([(5, 1.0, 0.0, 0.0, 0, 0)] + [(2, 1.0, 0.0, 0.0, 0, 0)] * 3, gamma=1.0, lam=1.0)
    np.testing.assert_allclose(adv, [1.0, 3.0, 2.0, 1.0])
    empty = np.zeros((0, 3))
    adv, ret = gae(empty, empty, empty, empty.astype(bool), empty.astype(bool), G, L)
    assert adv.shape == ret.shape == (0, 3)


@pytest.mark.parametrize("lam", [0.0, 0.95, 1.0])
def test_matches_a_plain_loop_on_random_streams(lam):
    rng = np.random.default_rng(1)
    n = 200
    stream = rng.integers(0, 7, n)
    r, v, nv = rng.normal(size=(3, n))
    term = rng.random(n) < 0.1
    trunc = ~term & (rng.random(n) < 0.1)
    adv, _ = run(list(zip(stream, r, v, nv, term, trunc, strict=True)), 0.97, lam)
    want = np.zeros(n)
    later: dict[int, float] = {}
    for i in range(n - 1, -1, -1):
        s = int(stream[i])
        delta = r[i] + 0.97 * (0.0 if term[i] else nv[i]) - v[i]
        carry = 0.0 if (term[i] or trunc[i]) else later.get(s, 0.0)
        want[i] = delta + 0.97 * lam * carry
        later[s] = want[i]
    np.testing.assert_allclose(adv, want)

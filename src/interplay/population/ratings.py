"""Ratings from two-player games: Elo, and OpenSkill's Plackett-Luce model. A league rates
its learner and pool with either; an evolutionary search rates its members with Elo."""

from __future__ import annotations

from typing import Protocol


class Rater(Protocol):
    """A rating system: a fresh player's skill, the update after one game, and the number
    shown for a skill."""

    def new(self) -> list[float]: ...

    def update(self, a: list[float], b: list[float], score: float
               ) -> tuple[list[float], list[float]]: ...

    def shown(self, skill: list[float]) -> float: ...


class Elo:
    """Elo ratings: everyone starts at 1000; a game moves the two players by ``k`` times the
    difference between the first one's score (1, 0.5, 0) and its expected score."""

    def __init__(self, k: float):
        self.k = k

    def new(self) -> list[float]:
        return [1000.0]

    def update(self, a: list[float], b: list[float], score: float
               ) -> tuple[list[float], list[float]]:
        # Bounded so that far-apart ratings give a sure result, not an overflow.
        expected = 1.0 / (1.0 + 10 ** min(max((b[0] - a[0]) / 400, -300.0), 300.0))
        delta = self.k * (score - expected)
        return [a[0] + delta], [b[0] - delta]

    def shown(self, skill: list[float]) -> float:
        return skill[0]


class OpenSkill:
    """OpenSkill's Plackett-Luce model: a skill ``mu`` and its uncertainty ``sigma`` per
    player, shown as the cautious ``mu - 3 sigma``."""

    def __init__(self) -> None:
        from openskill.models import PlackettLuce

        self.model = PlackettLuce()

    def new(self) -> list[float]:
        fresh = self.model.rating()
        return [fresh.mu, fresh.sigma]

    def update(self, a: list[float], b: list[float], score: float
               ) -> tuple[list[float], list[float]]:
        ranks = [0.0, 0.0] if score == 0.5 else [0.0, 1.0] if score == 1.0 else [1.0, 0.0]
        (ra,), (rb,) = self.model.rate([[self.model.rating(mu=a[0], sigma=a[1])],
                                        [self.model.rating(mu=b[0], sigma=b[1])]], ranks=ranks)
        return [ra.mu, ra.sigma], [rb.mu, rb.sigma]

    def shown(self, skill: list[float]) -> float:
        return skill[0] - 3.0 * skill[1]

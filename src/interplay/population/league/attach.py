"""A self-play league and its exploiters, attached to every run whose config has a league
(``league.snapshot_every`` above 0)."""

from __future__ import annotations

from typing import Any

from interplay.config.schema import Config
from interplay.experiment.attach import Attachment, register_attachment
from interplay.population.league.exploiters import Exploiters
from interplay.population.league.pool import League
from interplay.population.league.remote import LeagueOnRay


@register_attachment
def attach_league(cfg: Config, exp: Any) -> list[Attachment]:
    """The league ``cfg.league`` asks for, then its exploiters (if any), or nothing; on Ray,
    the league's members ride in the env runners, and exploiters and exploitability checks
    train here, in the learner's process, on env copies of their own."""
    if cfg.league.snapshot_every <= 0:
        return []
    league = League(cfg, exp)
    parts: list[Attachment] = [league]
    if cfg.backend.name == "ray":
        parts.append(LeagueOnRay(league))
    if cfg.league.exploiters or cfg.league.exploit_every:
        parts.append(Exploiters(cfg, exp, league))
    return parts

"""A self-play league and its exploiters, attached to every run whose config has a league
(``league.snapshot_every`` above 0)."""

from __future__ import annotations

from typing import Any

from interplay.config.schema import Config
from interplay.errors import ConfigError
from interplay.experiment.attach import Attachment, register_attachment
from interplay.population.league.exploiters import Exploiters
from interplay.population.league.pool import League
from interplay.population.league.remote import LeagueOnRay


@register_attachment
def attach_league(cfg: Config, exp: Any) -> list[Attachment]:
    """The league ``cfg.league`` asks for, then its exploiters (if any), or nothing; on Ray,
    the league's members ride in the env runners."""
    if cfg.league.snapshot_every <= 0:
        return []
    exploits = cfg.league.exploiters or cfg.league.exploit_every
    if cfg.backend.name == "ray" and exploits:
        key = "league.exploiters" if cfg.league.exploiters else "league.exploit_every"
        raise ConfigError(
            f"{key}: exploiters and exploitability checks train in this process, against the "
            "league's members acting here, so they run with backend.name: local only; a league "
            f"without them runs on Ray (set {key} to "
            f"{'[]' if key == 'league.exploiters' else '0'}), or set backend.name: local")
    league = League(cfg, exp)
    if cfg.backend.name == "ray":
        return [league, LeagueOnRay(league)]
    if not exploits:
        return [league]
    return [league, Exploiters(cfg, exp, league)]

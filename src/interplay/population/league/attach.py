"""A self-play league and its exploiters, attached to every run whose config has a league
(``league.snapshot_every`` above 0)."""

from __future__ import annotations

from typing import Any

from interplay.config.schema import Config
from interplay.errors import ConfigError
from interplay.experiment.attach import Attachment, register_attachment
from interplay.population.league.exploiters import Exploiters
from interplay.population.league.pool import League


@register_attachment
def attach_league(cfg: Config, exp: Any) -> list[Attachment]:
    """The league ``cfg.league`` asks for, then its exploiters (if any), or nothing."""
    if cfg.league.snapshot_every <= 0:
        return []
    if cfg.backend.name == "ray":
        raise ConfigError("league.snapshot_every: a league runs with backend.name: local only "
                          "(its opponents act in this process); set backend.name: local or "
                          "league.snapshot_every: 0")
    league = League(cfg, exp)
    if not (cfg.league.exploiters or cfg.league.exploit_every):
        return [league]
    return [league, Exploiters(cfg, exp, league)]

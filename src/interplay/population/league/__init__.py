"""Self-play leagues: the pool of frozen snapshots and fixed members, matchmaking and ratings,
exploiters and exploitability checks. Importing the package attaches a league to every run
whose config has one (``league.snapshot_every`` above 0)."""

from interplay.population.league import attach  # noqa: F401  (registers the league's builder)

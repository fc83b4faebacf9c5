"""Hooks into the runner. Subclass :class:`Callbacks` and override what you need."""

from __future__ import annotations

from typing import Any

from interplay.run.episodes import Episode


class Callbacks:
    """Every hook gets explicit keyword arguments; none needs to return anything.

    ``runner`` is the :class:`interplay.run.runner.Runner` stepping the envs. Custom episode
    metrics go through ``episode.add_metric(name, value, reduce)`` and land in
    ``metrics.jsonl`` and TensorBoard like the built-in ones.
    """

    metrics: tuple[str, ...] = ()
    """The custom metrics this callback adds, so ``train.target_metric`` may name them before
    any episode has reported one; a name ending in ``/`` covers every name under it. Names
    under ``custom/`` need no declaring."""

    def on_env_created(self, *, env: Any, env_index: int, runner: Any) -> None:
        """A copy of the env was built (``env`` is the PettingZoo env, or the batched env)."""

    def on_episode_start(self, *, episode: Episode, env_index: int, runner: Any) -> None:
        """A copy was reset and its episode begins."""

    def on_episode_step(self, *, episode: Episode, env_index: int, runner: Any) -> None:
        """A copy took one env step within ``episode``."""

    def on_episode_end(self, *, episode: Episode, env_index: int, runner: Any) -> None:
        """``episode`` finished; ``episode.returns`` and ``episode.length`` are final."""

    def on_sample_end(self, *, runner: Any, env_steps: int) -> None:
        """The runner finished a stretch of sampling, before the algorithm learns from it."""


class CallbackList(Callbacks):
    """Several callbacks called in order; hooks nobody overrides are skipped."""

    def __init__(self, callbacks: list[Callbacks]):
        self.callbacks = list(callbacks)
        self.metrics = tuple(m for c in self.callbacks for m in c.metrics)
        # Whether any callback overrides on_episode_step; else the runner skips that hook.
        self.wants_steps = any(
            type(c).on_episode_step is not Callbacks.on_episode_step for c in self.callbacks
        )

    def on_env_created(self, **kw: Any) -> None:
        for c in self.callbacks:
            c.on_env_created(**kw)

    def on_episode_start(self, **kw: Any) -> None:
        for c in self.callbacks:
            c.on_episode_start(**kw)

    def on_episode_step(self, **kw: Any) -> None:
        for c in self.callbacks:
            c.on_episode_step(**kw)

    def on_episode_end(self, **kw: Any) -> None:
        for c in self.callbacks:
            c.on_episode_end(**kw)

    def on_sample_end(self, **kw: Any) -> None:
        for c in self.callbacks:
            c.on_sample_end(**kw)

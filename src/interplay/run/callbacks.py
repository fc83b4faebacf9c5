"""Hooks into the runner. Subclass :class:`Callbacks` and override what you need."""

from __future__ import annotations

from typing import Any

from interplay.run.episodes import Episode


class Callbacks:
    """Every hook gets explicit keyword arguments; none needs to return anything.

    ``runner`` is the :class:`interplay.run.runner.Runner` stepping the envs: ``runner.env``
    is its vector env (``runner.env.agents``, ``runner.env.num_envs``), and ``runner.env_steps``
    and ``runner.episodes`` count so far. ``env_index`` is the copy, a row of the vector env.
    Custom episode metrics go through ``episode.add_metric(name, value, reduce)`` and land in
    ``metrics.jsonl`` and TensorBoard like the built-in ones; ``episode.user_data`` is yours.

    What a callback can reach of the env depends on where the copies live
    (``env.vectorization`` and the env kind):

    - in-process PettingZoo copies (``sync``, the default): ``episode.env`` is the copy's
      PettingZoo env (a copy rebuilt after its env raised brings a new one). Copies reset
      themselves as soon as an episode ends, so in ``on_episode_end`` that env already
      holds the *next* episode: read the finished one's end from ``episode.final``.
    - copies in worker processes (``async``): ``episode.env`` is None and ``on_env_created``
      gets the :class:`~interplay.envs.async_vec.AsyncVecEnv`; the envs themselves cannot be
      reached, only what each step brings back (``episode.final`` included).
    - built-in batched envs (``spread``, ...): ``episode.env`` is None; ``on_env_created``
      and ``runner.env`` give the batched env, whose arrays hold copy ``env_index`` at that
      index (``runner.env.state()[env_index]``, say).

    ``episode.final`` maps each agent to an :class:`~interplay.run.episodes.AgentEnd`: its
    last observation, the reward, terminated/truncated flags and info of the env step that
    ended its part. It is filled as agents finish (one that dies early is there from then
    on) and holds every agent that took part by ``on_episode_end``; it is kept only when some
    callback overrides ``on_episode_end``.
    """

    metrics: tuple[str, ...] = ()
    """The custom metrics this callback adds, so ``train.target_metric`` may name them before
    any episode has reported one; a name ending in ``/`` covers every name under it. Names
    under ``custom/`` need no declaring."""

    def on_env_created(self, *, env: Any, env_index: int, runner: Any) -> None:
        """A copy of the env was built: ``env`` is its PettingZoo env (in-process copies), the
        batched env (built-in envs) or the async vector env (copies in workers)."""

    def on_episode_start(self, *, episode: Episode, env_index: int, runner: Any) -> None:
        """A copy was reset and its episode begins."""

    def on_episode_step(self, *, episode: Episode, env_index: int, runner: Any) -> None:
        """A copy took one env step within ``episode``."""

    def on_episode_end(self, *, episode: Episode, env_index: int, runner: Any) -> None:
        """``episode`` finished: ``returns``, ``length`` and ``final`` (each agent's last
        observation, reward, flags and info) are complete. The copy has already been reset:
        ``episode.env`` (where there is one) holds the next episode."""

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
        # Whether any overrides on_episode_end; else episodes keep no ``final`` state.
        self.wants_ends = any(
            type(c).on_episode_end is not Callbacks.on_episode_end for c in self.callbacks
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

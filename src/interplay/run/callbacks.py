"""Hooks into the runner. Subclass :class:`Callbacks` and override what you need."""

from __future__ import annotations

from typing import Any

from interplay.errors import ConfigError
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

    A callback that keeps something across episodes (counts, running statistics, a
    ``user_data`` dict) returns it from :meth:`state_dict`; every checkpoint holds it, and a
    resumed run hands it back to :meth:`load_state_dict` of the callback at the same place in
    the list (``train.callbacks``, then those given in code), before any step. The state may
    hold what a checkpoint holds: dicts, lists, tuples, Python scalars and strings, NumPy
    arrays and torch tensors. By default a callback has no state.
    """

    metrics: tuple[str, ...] = ()
    """The custom metrics this callback adds, so ``train.target_metric`` may name them before
    any episode has reported one; a name ending in ``/`` covers every name under it. Names
    under ``custom/`` need no declaring."""

    def state_dict(self) -> dict[str, Any]:
        """What this callback keeps, to be saved in checkpoints; empty by default."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Take back what :meth:`state_dict` returned when the checkpoint was written."""

    def on_env_created(self, *, env: Any, env_index: int, runner: Any) -> None:
        """A copy of the env was built: ``env`` is its PettingZoo env (in-process copies), the
        batched env (built-in envs) or the async vector env (copies in workers)."""

    def on_episode_start(self, *, episode: Episode, env_index: int, runner: Any) -> None:
        """A copy was reset and its episode begins."""

    def next_env_options(self, *, env_index: int, episodes: list[dict[str, Any]],
                         runner: Any) -> dict[str, Any] | None:
        """A curriculum, for envs varied per episode (distributions in ``env.reset_options`` or
        ``env.kwargs``; training copies in this process): called as training copy
        ``env_index`` resets, with its finished episodes so far (the newest last, at most
        1,000; each its ``options`` and ``return`` summed over agents). Values returned
        replace what would be drawn for the next episode (a key of ``env.kwargs`` rebuilds
        the copy with it, any other is a reset option)."""
        return None

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

    def next_env_options(self, **kw: Any) -> dict[str, Any] | None:
        """Every callback's choice, later ones over earlier ones; None if none chose."""
        chosen: dict[str, Any] = {}
        for c in self.callbacks:
            chosen.update(c.next_env_options(**kw) or {})
        return chosen or None

    def on_episode_step(self, **kw: Any) -> None:
        for c in self.callbacks:
            c.on_episode_step(**kw)

    def on_episode_end(self, **kw: Any) -> None:
        for c in self.callbacks:
            c.on_episode_end(**kw)

    def on_sample_end(self, **kw: Any) -> None:
        for c in self.callbacks:
            c.on_sample_end(**kw)

    def state_dict(self) -> dict[str, Any]:
        """Each callback's class and state, in order."""
        return {"callbacks": [{"class": _name(c), "state": c.state_dict()} for c in self.callbacks]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Hand each callback its saved state, in order. Callbacks whose saved state is empty may
        come and go; every saved non-empty state must find a callback of its class."""
        saved = state.get("callbacks", [])
        names = [_name(c) for c in self.callbacks]
        pairs: list[tuple[Callbacks, dict[str, Any]]] = []
        if [s["class"] for s in saved] == names:
            pairs = [(c, s["state"]) for c, s in zip(self.callbacks, saved, strict=True)]
        else:
            at = 0
            for s in saved:
                if not s["state"]:
                    continue
                found = next((i for i in range(at, len(names)) if names[i] == s["class"]), None)
                if found is None:
                    raise ConfigError(
                        f"train.callbacks: the checkpoint holds the state of callback {s['class']}, "
                        f"but this run has no callback of that class after the ones matched so "
                        f"far (saved: {[x['class'] for x in saved]}; now: {names}); resume with "
                        "the same callbacks in the same order")
                pairs.append((self.callbacks[found], s["state"]))
                at = found + 1
        for c, s in pairs:
            c.load_state_dict(s)


def _name(callback: Callbacks) -> str:
    return f"{type(callback).__module__}:{type(callback).__qualname__}"

"""Trained policies out of their run: ``interplay.load_policy`` and ``type: frozen`` policies.

A run folder's ``config.yaml`` and a checkpoint rebuild the algorithm that trained the
policy (its networks, normalisation statistics, recurrent handling) without env copies,
storage or loggers: the env is built once to read its spaces and closed. What comes back acts
like the policy did in test phases: greedy, on the env's own observations.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from interplay.config.schema import Config
from interplay.errors import UserError
from interplay.experiment.run_store.run_folder import is_snapshot, source_run_dir
from interplay.run.actors import ActBatch, Actor, as_opponent, declared
from interplay.run.mapping import PolicySpec


class PolicyLoadError(UserError):
    """A run folder or checkpoint that does not give the policy asked for."""


def split_source(text: str, where: str) -> tuple[Path, str | None]:
    """``RUN_DIR[:policy_id]`` (or a checkpoint folder inside a run, or a league snapshot
    file ``RUN_DIR/league/snapshot_<env steps>.pt``) as a path and a policy."""
    path, pid = Path(text), None
    if not path.exists() and ":" in text:
        head, _, tail = text.rpartition(":")
        path, pid = Path(head), tail or None
    if not path.exists():
        raise PolicyLoadError(f"{where}: {text!r}: no such run folder")
    return path, pid


@dataclass
class Loaded:
    cfg: Config
    specs: dict[str, PolicySpec]
    algo: Any
    checkpoint: Path
    trained: list[str] = field(default_factory=list)


def snapshot_state(path: Path, where: str) -> dict[str, Any]:
    """The algorithm state a league snapshot file holds."""
    from interplay.experiment.run_store.statecodec import decode
    from interplay.nets.agents import stack_saved_nets

    try:
        return stack_saved_nets(decode(torch.load(path, map_location="cpu", weights_only=True)))
    except (OSError, RuntimeError, ValueError, KeyError, TypeError, EOFError,
            pickle.UnpicklingError) as err:
        raise PolicyLoadError(f"{where}: {path} is not a readable league snapshot "
                              f"({type(err).__name__}: {err})") from None


def load_run(source: Path, checkpoint: Path | None = None, where: str = "load_policy",
             trust: bool = True) -> Loaded:
    """The algorithm of the run in ``source`` (a run folder, a checkpoint folder in one, or a
    snapshot file in its ``league/`` folder), loaded from ``checkpoint``, the snapshot, or the
    newest valid checkpoint. ``trust=False`` refuses a run whose config names code (see
    :mod:`interplay.experiment.run_store.trust`) before anything is imported."""
    from interplay.experiment.build import (
        env_state_space,
        make_algorithms,
        make_specs,
        make_vec_env,
    )
    from interplay.experiment.run_store.checkpoint import CheckpointError, resolve_checkpoint
    from interplay.experiment.run_store.resume_check import open_run, run_config
    from interplay.experiment.run_store.trust import TrustError

    source = Path(source)
    run_dir = source_run_dir(source)
    snapshot = source.is_file() and is_snapshot(source)
    if run_dir != source:
        checkpoint = None if snapshot else source
    if not (run_dir / "config.yaml").is_file():
        raise PolicyLoadError(f"{where}: {source} is not a run folder (it has no config.yaml)")
    try:
        if snapshot:
            cfg, path = run_config(run_dir, ["log.console=false"], trust, where), source
            state = {"algo": snapshot_state(source, where)}
        else:
            cfg, state, path = open_run(run_dir, ["log.console=false"],
                                        resolve_checkpoint(checkpoint) if checkpoint else None,
                                        trust, where)
    except TrustError:
        raise
    except UserError as err:
        raise PolicyLoadError(f"{where}: {run_dir}: {err}") from None
    env, _ = make_vec_env(cfg, num_envs=1)
    try:
        specs = make_specs(cfg, env)
        algo = make_algorithms(cfg, specs, "cpu", env.turn_based, env_state_space(env))
    finally:
        env.close()
    try:
        algo.load_state_dict(state["algo"])
    except (KeyError, ValueError, RuntimeError, TypeError) as err:
        raise PolicyLoadError(
            f"{where}: checkpoint {path} does not fit the algorithm its config builds "
            f"({type(err).__name__}: {err}); it was written by another version or algorithm"
        ) from None
    except CheckpointError as err:
        raise PolicyLoadError(f"{where}: {err}") from None
    return Loaded(cfg, specs, algo, path, [p for p, s in specs.items() if s.trainable])


def pick_policy(loaded: Loaded, pid: str | None, where: str) -> str:
    if pid is None:
        if len(loaded.trained) != 1:
            raise PolicyLoadError(f"{where}: the run trained {loaded.trained}; say which, as "
                                  "RUN_DIR:policy_id")
        return loaded.trained[0]
    if pid not in loaded.specs:
        raise PolicyLoadError(f"{where}: the run has no policy {pid!r}; its policies are "
                              f"{list(loaded.specs)}")
    if pid not in loaded.trained:
        raise PolicyLoadError(f"{where}: policy {pid!r} was {loaded.specs[pid].config.type}, "
                              f"not trained; trained policies: {loaded.trained}")
    return pid


class FrozenActor:
    """Acts with a policy loaded from another run; never learns. Greedy unless asked."""

    def __init__(self, actor: Actor, explore: bool = False):
        self.actor = as_opponent(actor)  # it never learns: no teacher
        self.explore = explore
        self.squashed = declared(self.actor, "squashed")
        self.wants_env_obs = declared(self.actor, "wants_env_obs")

    def act(self, batch: ActBatch, explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        action, _ = self.actor.act(batch, self.explore and explore)
        return action, {}


def frozen_actor(spec: PolicySpec, source: str, where: str) -> FrozenActor:
    """The actor of ``policies.<pid>.from``: checked against the agents it is to control."""
    path, pid = split_source(source, where)
    loaded = load_run(path, where=where)
    pid = pick_policy(loaded, pid, where)
    check_same_policy(loaded.specs[pid], spec, f"{where}: policy {pid!r} of {path}")
    return FrozenActor(loaded.algo.actor(pid))


def check_same_policy(theirs: PolicySpec, spec: PolicySpec, what: str) -> None:
    """Refuse a loaded policy (``what`` names it) that sees or acts differently from ``spec``."""
    from interplay.envs.spaces import same_space

    for kind in ("obs_space", "action_space"):
        if not same_space(getattr(theirs, kind), getattr(spec, kind)):
            raise PolicyLoadError(f"{what} was trained on {getattr(theirs, kind)} but policy "
                                  f"{spec.id!r} here has {getattr(spec, kind)}")
    if theirs.config.stack_size != spec.config.stack_size:
        raise PolicyLoadError(f"{what} saw {theirs.config.stack_size} stacked frames; set "
                              f"policies.{spec.id}.stack_size to that")


class Policy:
    """A trained policy, loaded with :func:`load_policy`, usable without any training object."""

    def __init__(self, loaded: Loaded, pid: str):
        from interplay.envs.spaces import obs_view

        self.id = pid
        self.spec = loaded.specs[pid]
        self.actor = as_opponent(loaded.algo.actor(pid))  # it acts, and learns no more
        self.checkpoint = loaded.checkpoint
        agent = self.spec.agents[0]
        self.view = obs_view(self.spec.obs_space, agent)
        self.observation_space = self.spec.obs_space
        self.action_space = self.spec.action_space

    def initial_state(self) -> dict[str, Any]:
        """What to pass as ``state`` to follow one agent (or a batch) through an episode:
        recurrent state and stacked frames live in it; a fresh one starts an episode."""
        return {}

    def act(self, observation: Any, mask: Any = None, state: dict[str, Any] | None = None,
            explore: bool = False) -> Any:
        """The action for one env observation (as the env gives it: a Dict observation may
        carry its ``action_mask``), or actions for a list or array of them. ``mask`` is the
        legal actions when the env gives them elsewhere (for a Dict or Tuple action space, flat
        or keyed like the space, as :mod:`interplay.envs.composite` says); ``state`` (from
        :meth:`initial_state`) carries recurrent state between the steps of an episode. Actions
        come in the env's own terms: for a Dict or Tuple space, a dict or tuple of NumPy values
        (an array of them for a batch)."""
        single = self._single(observation)
        batch = [observation] if single else self._observations(observation)
        n = len(batch)
        rows = np.zeros((n, self.view.dim), self.view.dtype)
        masks = None
        for i, obs in enumerate(batch):
            try:
                self.view.write(obs, rows, i)
            except (ValueError, TypeError, KeyError, AttributeError, IndexError) as err:
                raise PolicyLoadError(f"policy {self.id!r}: observation {i} "
                                      f"({type(obs).__name__}) does not fit "
                                      f"{self.observation_space}: {err}") from None
            if self.view.has_mask_key:
                masks = masks if masks is not None else np.ones(
                    (n, self.spec.action_view.mask_dim), bool)
                masks[i] = self._legal([obs["action_mask"]], 1,
                                       f"observation {i}'s action_mask")[0]
        if mask is not None:
            masks = self._legal(mask if not single else [mask], n, "mask")
        if self.spec.prep is not None:
            rows = self.spec.prep(rows[:, None])[:, 0]
        state = {} if state is None else state
        rows = self._stacked(rows, state)
        recurrent_state = state.setdefault("recurrent_state", {})
        first = np.full(n, not state.get("started", False))
        state["started"] = True
        action, _ = self.actor.act(ActBatch(obs=rows, mask=masks, slot=np.zeros(n, np.int64),
                                            env=np.arange(n), first=first,
                                            recurrent_state=recurrent_state),
                                   explore)
        view = self.spec.action_view
        out = view.to_env(view.to_env_batch(action, declared(self.actor, "squashed")))
        return out[0] if single else out

    def _observations(self, observation: Any) -> list[Any]:
        """A batch of observations as a list; anything else is not an observation."""
        try:
            return list(observation)
        except TypeError:
            raise PolicyLoadError(
                f"policy {self.id!r}: the observation ({type(observation).__name__}) is "
                f"neither one observation of {self.observation_space} nor a list or array of "
                "them") from None

    def _legal(self, mask: Any, n: int, what: str) -> np.ndarray:
        """``mask`` as ``n`` rows of legal actions, or an error naming what does not fit."""
        view = self.spec.action_view
        dim = view.mask_dim
        if not dim:
            raise PolicyLoadError(f"policy {self.id!r}: {what} given, but the actions of "
                                  f"{self.action_space} cannot be masked")
        if view.kind == "composite":  # one mask per observation, each flat or per leaf
            try:
                return np.stack([view.legal(m) for m in self._observations(mask)]) if n else (
                    np.ones((0, dim), bool))
            except ValueError as err:
                raise PolicyLoadError(f"policy {self.id!r}: {what}: {err}") from None
        try:
            legal = np.asarray(mask)
        except (ValueError, TypeError) as err:
            raise PolicyLoadError(f"policy {self.id!r}: {what} is not an array ({err})") from None
        if legal.dtype.kind not in "biuf" or legal.size != n * dim:
            raise PolicyLoadError(
                f"policy {self.id!r}: {what} must give {dim} legal-action flags (bools or 0/1) "
                f"per observation for {self.action_space}, {n * dim} in all; got "
                f"{legal.size} of dtype {legal.dtype}")
        return legal.reshape(n, dim).astype(bool)

    def _single(self, observation: Any) -> bool:
        if isinstance(observation, dict):
            return True
        if isinstance(observation, (list, tuple)):
            return False
        shape = getattr(self.observation_space, "shape", None)
        return shape is not None and np.ndim(observation) == len(shape)

    def _stacked(self, rows: np.ndarray, state: dict[str, Any]) -> np.ndarray:
        size = self.spec.config.stack_size
        if size == 1:
            return rows
        frames = state.get("frames")
        if frames is None or frames.shape[0] != rows.shape[0]:
            frames = np.zeros((rows.shape[0], size, rows.shape[1]), rows.dtype)
        frames[:, :-1] = frames[:, 1:]
        frames[:, -1] = rows
        state["frames"] = frames
        return frames.reshape(rows.shape[0], -1)


def load_policy(run_dir: str | Path, policy_id: str | None = None,
                checkpoint: str | Path | None = None, trust: bool = True) -> Policy:
    """The trained policy ``policy_id`` of the run in ``run_dir`` (the only trained one when
    not given), from ``checkpoint`` or the newest valid one, ready to ``act``.

    ``trust=False`` refuses a run folder whose config names code other than installed env
    packages (a run from someone else), before anything is imported."""
    where = "load_policy"
    path = Path(run_dir)
    if not path.exists():
        raise PolicyLoadError(f"{where}: {path}: no such run folder")
    loaded = load_run(path, Path(checkpoint) if checkpoint else None, where, trust)
    return Policy(loaded, pick_policy(loaded, policy_id, where))

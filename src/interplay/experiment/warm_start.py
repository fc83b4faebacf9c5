"""Warm starts: trainable policies that begin from weights trained in another run.

``policies.<pid>.init_from`` (and ``hpo.init_from`` for a search's first generation) names a
run, a checkpoint folder or a league snapshot. The policy there is loaded as
:func:`interplay.load_policy` loads it, checked against the policy here (spaces, stacked
frames, algorithm family, every tensor's shape) and copied in before the first step: its
actor, or with ``init_parts: all`` its critics, targets and statistics too. Optimisers and
RNGs stay fresh. The run folder's ``init_from.json`` records what came from where.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from interplay.algos.policy_algorithms import PolicyAlgorithms
from interplay.config.schema import Config
from interplay.experiment.policies import (
    PolicyLoadError,
    check_same_policy,
    load_run,
    pick_policy,
    split_source,
)
from interplay.run.mapping import PolicySpec

RECORD_FILE = "init_from.json"


@dataclass(frozen=True)
class WarmStart:
    """Policy ``pid`` starts from ``source``; ``where`` is the config key that asked."""

    pid: str
    source: str
    parts: str
    where: str


def requests(cfg: Config, specs: dict[str, PolicySpec], search: bool = False) -> list[WarmStart]:
    """What the config asks to warm-start: each ``policies.<pid>.init_from``, and with
    ``search`` (a search's first generation) ``hpo.init_from`` for every other trained policy."""
    asked = [WarmStart(pid, p.init_from, p.init_parts, f"policies.{pid}.init_from")
             for pid, p in cfg.policies.items() if p.init_from]
    if search and cfg.hpo.init_from:
        named = {w.pid for w in asked}
        asked += [WarmStart(pid, cfg.hpo.init_from, "actor", "hpo.init_from")
                  for pid, spec in specs.items() if spec.trainable and pid not in named]
    return asked


def warm_start(algos: PolicyAlgorithms, specs: dict[str, PolicySpec], asked: list[WarmStart],
               run_dir: Path | None = None) -> list[dict[str, Any]]:
    """Copy each asked-for policy's weights in; all are checked before any is copied. Returns
    (and writes into ``run_dir``) the record of what came from where."""
    plans = [_plan(algos, specs, w) for w in asked]
    for copies, _ in plans:
        for theirs, ours in copies:
            _copy(theirs, ours)
    record = [r for _, r in plans]
    if record and run_dir is not None:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        (Path(run_dir) / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")
    return record


def _plan(algos: PolicyAlgorithms, specs: dict[str, PolicySpec],
          w: WarmStart) -> tuple[list[tuple[Any, Any]], dict[str, Any]]:
    spec = specs.get(w.pid)
    if spec is None or not spec.trainable:
        raise PolicyLoadError(f"{w.where}: policy {w.pid!r} is not a trained policy of this run")
    path, pid = split_source(w.source, w.where)
    loaded = load_run(path, where=w.where)
    if pid is None and w.pid in loaded.trained:
        pid = w.pid  # the policy of the same id, when the source trained several
    pid = pick_policy(loaded, pid, w.where)
    check_same_policy(loaded.specs[pid], spec, f"{w.where}: policy {pid!r} of {path}")
    theirs_algo, ours_algo = loaded.algo.of(pid), algos.of(w.pid)
    if theirs_algo.family_name() != ours_algo.family_name():
        raise PolicyLoadError(
            f"{w.where}: policy {pid!r} of {path} was trained by {theirs_algo.name}, whose "
            f"networks are not {ours_algo.name}'s; start from a run of the "
            f"{ours_algo.family_name()} family, or train this one with {theirs_algo.name}")
    theirs, ours = theirs_algo.warm_parts(pid), ours_algo.warm_parts(w.pid)
    names = [*ours.actor] + ([*ours.rest] if w.parts == "all" else [])
    mine = {**ours.actor, **ours.rest}
    source = {**theirs.actor, **theirs.rest}
    differ: list[str] = []
    for name in names:
        if name not in source:
            differ.append(f"{name}: this run has one, {path} none")
            continue
        differ += [f"{name}.{d}" if d else name for d in _differences(source[name], mine[name])]
    differ += [f"{name}: {path} has one, this run none" for name in theirs.actor
               if name not in ours.actor]
    if differ:
        shown = "; ".join(differ[:12]) + (f"; and {len(differ) - 12} more" if len(differ) > 12 else "")
        hint = ("" if w.parts == "actor" else
                "; init_parts: actor copies only what the policy acts with")
        raise PolicyLoadError(
            f"{w.where}: policy {pid!r} of {path} does not fit policy {w.pid!r} here (another "
            f"network, algo.model or algorithm settings): {shown}{hint}")
    record = {"policy": w.pid, "from": w.source, "run": str(path), "policy_id": pid,
              "checkpoint": str(loaded.checkpoint), "algorithm": theirs_algo.name,
              "parts": w.parts, "copied": names, "key": w.where}
    return [(source[n], mine[n]) for n in names], record


def _tensors(obj: Any) -> dict[str, Any]:
    """A part's arrays by name: a module's parameters and buffers, statistics, or a tensor."""
    if isinstance(obj, torch.Tensor):
        return {"": obj}
    state = obj.state_dict()
    return {k: v for k, v in state.items() if isinstance(v, (torch.Tensor, np.ndarray))}


def _differences(theirs: Any, ours: Any) -> list[str]:
    a, b = _tensors(theirs), _tensors(ours)
    out = [f"{k}: {tuple(a[k].shape)} there, {tuple(b[k].shape)} here"
           for k in a if k in b and tuple(a[k].shape) != tuple(b[k].shape)]
    out += [f"{k}: only there {tuple(a[k].shape)}" for k in a if k not in b]
    out += [f"{k}: only here {tuple(b[k].shape)}" for k in b if k not in a]
    return out


def _copy(theirs: Any, ours: Any) -> None:
    if isinstance(ours, torch.Tensor):
        with torch.no_grad():
            ours.copy_(theirs)
        return
    # In place: the optimiser here keeps pointing at these parameters.
    ours.load_state_dict(theirs.state_dict())

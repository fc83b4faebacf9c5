"""``interplay export``: a trained policy as one TorchScript or ONNX file, for use without interplay.

The file acts as :func:`interplay.load_policy`'s policy does, greedily. Its inputs, in order:
``obs`` (``[n, ...]`` float32: the observation as the env gives it, flattened inside; for a
Dict observation, its entries other than ``action_mask`` flattened and joined in the space's
order), ``mask`` (``[n, actions]`` bool, legal actions; discrete and MultiDiscrete actions
only) and ``state`` (``[n, state_size]`` float32, zeros at an episode's start; recurrent
policies only). Its outputs: the action in the env's own terms (``[n]`` int64, ``[n, k]``
int64, or ``[n, *shape]`` float32 within the Box's bounds), then the next ``state`` for a
recurrent policy. What the file needs is written into it too (``interplay.json``: TorchScript's
extra files, ONNX's metadata).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from interplay.envs.spaces import ActionView
from interplay.errors import UserError
from interplay.experiment.policies import PolicyLoadError, load_run, pick_policy
from interplay.run.actors import declared


class ExportError(UserError):
    """A policy that cannot be exported as asked."""


class Exported(nn.Module):
    """A greedy policy, with the env's observation in and its action out."""

    def __init__(self, greedy: nn.Module, view: ActionView, squashed: bool, mask_dim: int):
        super().__init__()
        self.greedy = greedy
        self.kind = view.kind
        self.shape = tuple(view.shape)
        self.squashed = squashed
        self.mask_dim = mask_dim
        self.has_mask = view.kind != "box"
        self.state_size = int(getattr(greedy, "state_size", 0))
        if view.kind == "box":
            low, high = np.asarray(view.space.low, np.float32), np.asarray(view.space.high, np.float32)
            finite = np.isfinite(low) & np.isfinite(high)
            self.register_buffer("low", torch.as_tensor(np.where(finite, low, -1.0)).reshape(-1))
            self.register_buffer("high", torch.as_tensor(np.where(finite, high, 1.0)).reshape(-1))
            self.register_buffer("finite", torch.as_tensor(finite).reshape(-1))
            self.register_buffer("clip_low", torch.as_tensor(low).reshape(-1))
            self.register_buffer("clip_high", torch.as_tensor(high).reshape(-1))
        else:
            start = view.start if view.kind == "discrete" else np.asarray(view.space.start)
            self.register_buffer("start", torch.as_tensor(np.asarray(start, np.int64)))

    def inputs(self) -> list[str]:
        return ["obs", *(["mask"] if self.has_mask else []),
                *(["state"] if self.state_size else [])]

    def outputs(self) -> list[str]:
        return ["action", *(["next_state"] if self.state_size else [])]

    def forward(self, *inputs: torch.Tensor) -> Any:
        obs = inputs[0]
        n = obs.shape[0]
        x = obs.reshape(n, -1).float()
        mask = (inputs[1].bool() if self.has_mask
                else torch.ones(n, self.mask_dim, dtype=torch.bool, device=x.device))
        state = inputs[-1] if self.state_size else x.new_zeros(n, 0)
        action, state = self.greedy(x, mask, state)
        action = self._to_env(action, n)
        return (action, state) if self.state_size else action

    def _to_env(self, action: torch.Tensor, n: int) -> torch.Tensor:
        if self.kind != "box":
            return action.long() + self.start
        a = action.reshape(n, -1)
        if self.squashed:
            unsquashed = self.low + (a.clamp(-1.0, 1.0) + 1.0) * 0.5 * (self.high - self.low)
            a = torch.where(self.finite, unsquashed, a)
        else:
            a = torch.maximum(torch.minimum(a, self.clip_high), self.clip_low)
        return a.reshape(n, *self.shape)


def exported_module(run_dir: str | Path, policy_id: str | None = None,
                    checkpoint: str | Path | None = None) -> tuple[Exported, dict[str, Any]]:
    """The module ``interplay export`` writes, and what it records about it."""
    where = "export"
    path = Path(run_dir)
    if not path.exists():
        raise PolicyLoadError(f"{where}: {path}: no such run folder")
    loaded = load_run(path, Path(checkpoint) if checkpoint else None, where)
    pid = pick_policy(loaded, policy_id, where)
    spec = loaded.specs[pid]
    if spec.config.stack_size != 1 or spec.prep is not None:
        raise ExportError(f"{where}: policy {pid!r} stacks frames or resizes images before it "
                          "acts; export takes the observation as the network does and cannot "
                          "do that part yet (use interplay.load_policy)")
    if spec.obs_view.leaves is not None:
        raise ExportError(f"{where}: policy {pid!r} reads its Dict observations entry by entry "
                          "(image entries kept as bytes); export takes one flat float vector "
                          "and cannot do that yet (use interplay.load_policy)")
    algo = loaded.algo.of(pid)
    try:
        greedy = algo.greedy_net(pid)
    except UserError as err:
        raise ExportError(f"{where}: policy {pid!r}: {err}") from None
    actor = loaded.algo.actor(pid)
    module = Exported(greedy, spec.action_view, declared(actor, "squashed"),
                      spec.action_view.mask_dim)
    module.eval().requires_grad_(False)  # a deployed policy only acts
    info = {"policy": pid, "run": str(path), "checkpoint": str(loaded.checkpoint),
            "algorithm": algo.name, "inputs": module.inputs(), "outputs": module.outputs(),
            "obs_dim": spec.obs_view.dim, "mask_dim": spec.action_view.mask_dim,
            "state_size": module.state_size, "action_space": str(spec.action_space),
            "observation_space": str(spec.obs_space)}
    return module, info


def example_inputs(module: Exported, obs_dim: int, n: int = 2) -> tuple[torch.Tensor, ...]:
    inputs = [torch.zeros(n, obs_dim)]
    if module.has_mask:
        inputs.append(torch.ones(n, module.mask_dim, dtype=torch.bool))
    if module.state_size:
        inputs.append(torch.zeros(n, module.state_size))
    return tuple(inputs)


def export_policy(run_dir: str | Path, out: str | Path,
                  fmt: Literal["torchscript", "onnx"] = "torchscript",
                  policy_id: str | None = None, checkpoint: str | Path | None = None) -> Path:
    """Write policy ``policy_id`` of the run in ``run_dir`` to ``out`` (see this module)."""
    module, info = exported_module(run_dir, policy_id, checkpoint)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    example = example_inputs(module, info["obs_dim"])
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes on shapes, the legacy exporter's notice
            if fmt == "torchscript":
                traced = torch.jit.trace(module, example, check_trace=False)
                torch.jit.save(traced, str(tmp), _extra_files={"interplay.json": json.dumps(info)})
            else:
                _onnx(module, example, info, tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _onnx(module: Exported, example: tuple[torch.Tensor, ...], info: dict[str, Any],
          path: Path) -> None:
    try:
        import onnx
    except ImportError:
        raise ExportError("export --format onnx needs the onnx package: pip install "
                          "'interplay[onnx]'") from None
    names_in, names_out = info["inputs"], info["outputs"]
    axes = {name: {0: "batch"} for name in [*names_in, *names_out]}
    torch.onnx.export(module, example, str(path), input_names=names_in, output_names=names_out,
                      dynamic_axes=axes, dynamo=False)
    model = onnx.load(str(path))
    entry = model.metadata_props.add()
    entry.key, entry.value = "interplay.json", json.dumps(info)
    onnx.save(model, str(path))

"""MLPs with orthogonal init (one agent's network; :mod:`interplay.nets.agents` puts them over a
policy's agents)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from interplay.config.model import ModelSettings

NUMPY_TANH_FROM = 4096  # numbers; below, torch's tanh takes under 8 us even where it is slow


class Tanh(nn.Tanh):
    """``nn.Tanh`` whose float32 work on the CPU runs through NumPy's tanh.

    Some CPUs run torch's float32 tanh ten times slower than NumPy's (on one thread, over
    500 x 64 numbers: 64 us against 6 us on an AMD EPYC; elu and exp are slow there too,
    relu and sigmoid are not); at hundreds of agents that is a sixth of an acting step. The
    values agree with torch's to one float32 ulp, and the gradient is ``1 - tanh(x)**2`` as
    torch's. Where NumPy cannot stand in (another device or dtype, tracing, scripting, ONNX
    export, ``torch.func`` transforms) it is torch's own, and so it is on arrays of fewer than
    ``NUMPY_TANH_FROM`` numbers, where handing them over costs more than it saves (one agent
    acting, say).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() < NUMPY_TANH_FROM or not _numpy_may(x):
            return torch.tanh(x)
        if x.requires_grad and torch.is_grad_enabled():
            return _NumpyTanh.apply(x)
        return torch.from_numpy(np.tanh(x.numpy()))


def _numpy_may(x: torch.Tensor) -> bool:
    """NumPy may compute on ``x``'s numbers in place of torch."""
    return (x.dtype == torch.float32 and x.device.type == "cpu" and not x.is_sparse and not x.is_neg()
            and not torch.jit.is_tracing() and not torch.jit.is_scripting()
            and not torch.onnx.is_in_onnx_export()
            and not torch._C._functorch.is_functorch_wrapped_tensor(x))


class _NumpyTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        y = torch.from_numpy(np.tanh(x.detach().numpy()))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y)


ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU, "silu": nn.SiLU,
}


def mlp(in_dim: int, out_dim: int, net: ModelSettings, out_gain: float) -> nn.Sequential:
    """Linear layers with ``net``'s activation between them; orthogonal weights, zero biases.

    Hidden layers get gain sqrt(2) (and a layer norm before the activation with
    ``net.layer_norm``); the last gets ``out_gain`` (small for policy heads, so that a fresh
    policy is near uniform).
    """
    layers: list[nn.Module] = []
    width = in_dim
    for h in net.hidden:
        layers.append(init_linear(nn.Linear(width, h), np.sqrt(2)))
        if net.layer_norm:
            layers.append(nn.LayerNorm(h))
        layers.append(ACTIVATIONS[net.activation]())
        width = h
    layers.append(init_linear(nn.Linear(width, out_dim), out_gain))
    return nn.Sequential(*layers)


def init_linear(layer: nn.Linear, gain: float) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer

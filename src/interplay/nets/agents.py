"""A policy's network over its agents: one shared by all of them, or one per agent held as one
batched module over the agent axis.

Both take flat rows ``[n, in]`` with each row's slot (its agent's index in the policy), or a
whole block ``[..., k, in]`` (``over_agents``). Shared parameters make one call over every row.
Separate parameters are stacked, ``[k, ...]`` per tensor, and each agent's rows meet its own
slice in one batched call: a full ``[E, k]`` grid of rows (every agent of every copy, copy by
copy, as the runner hands simultaneous moves) is a reshape; other rows (agents missing in some
copies, one mover per turn, a shuffled minibatch) are grouped by slot into a padded
``[agents, rows, in]`` block, holding only the agents that have rows.

Linear layers are one batched matmul each, layer norms and activations run over the whole
block, a Gaussian's log-std is appended from each agent's own; any other part (a CNN encoder,
a user's module) runs under ``torch.func.vmap`` over the agent axis, or, where vmap cannot run
it, once per agent on that agent's own rows.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import nn
from torch.func import functional_call, vmap

from interplay.nets.distributions import LogStd
from interplay.nets.mlp import ACTIVATIONS

_ELEMENTWISE = (nn.Identity, *ACTIVATIONS.values())


def agent_nets(make: Callable[[], nn.Module], agents: int, shared: bool) -> SharedNet | AgentStack:
    """``make()``'s network for a policy of ``agents`` agents: one for all (``shared``, or a
    single agent), else one per agent, made in agent order (each initialised as its own call
    of ``make`` would be) and stacked."""
    if shared or agents == 1:
        return SharedNet(make())
    return AgentStack([make() for _ in range(agents)])


class SharedNet(nn.Module):
    """One network for every agent of a policy: one call over all rows."""

    per_agent: ClassVar[bool] = False

    def __init__(self, net: nn.Module):
        super().__init__()
        # A list of one, so that saved weights keep the ``nets.0.`` keys they have always had.
        self.nets = nn.ModuleList([net])

    def forward(self, x: torch.Tensor, slot: torch.Tensor | None = None) -> torch.Tensor:
        return self.nets[0](x)

    def over_agents(self, x: torch.Tensor) -> torch.Tensor:
        """A block ``[..., k, in]`` -> ``[..., k, out]``."""
        y = self.nets[0](x.reshape(-1, x.shape[-1]))
        return y.reshape(*x.shape[:-1], y.shape[-1])

    def agent(self, j: int) -> nn.Module:
        """Agent ``j``'s network as a plain module (the shared one)."""
        return self.nets[0]


class AgentStack(nn.Module):
    """One network per agent, as one module whose every tensor has a leading agent axis.

    ``net`` is the first agent's network with each parameter and buffer replaced by the
    stack of all agents' (so saved weights are ``net.<name>``, ``[k, ...]``; checkpoints saved
    with one network per agent are stacked as they are read, :func:`stack_saved_nets`).
    """

    per_agent: ClassVar[bool] = True

    def __init__(self, nets: list[nn.Module]):
        super().__init__()
        self.agents = len(nets)
        self.net = _stacked(nets)
        self.steps = _steps(self.net)

    def forward(self, x: torch.Tensor, slot: torch.Tensor | None = None) -> torch.Tensor:
        """Rows ``[n, in]``, row ``i`` agent ``slot[i]``'s (None: a full grid, copy by copy)."""
        k, n = self.agents, x.shape[0]
        if slot is None or (n and n % k == 0 and bool(
                (slot.view(-1, k) == torch.arange(k, device=slot.device)).all())):
            y = self.over_agents(x.reshape(n // k, k, *x.shape[1:]))
            return y.reshape(n, -1)
        return self._ragged(x, slot)

    def over_agents(self, x: torch.Tensor) -> torch.Tensor:
        """A block ``[..., k, in]`` -> ``[..., k, out]``: agent ``j``'s rows through its network."""
        lead, k = x.shape[:-2], self.agents
        y = self._block(x.reshape(-1, k, x.shape[-1]).transpose(0, 1), None, None)
        return y.transpose(0, 1).reshape(*lead, k, y.shape[-1])

    def _ragged(self, x: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
        """Rows of any agents in any order: grouped by agent into a padded block and back."""
        n = x.shape[0]
        slot = slot.long()
        counts = torch.bincount(slot, minlength=self.agents)
        present = counts > 0
        agents = present.nonzero().squeeze(1)
        group = (present.cumsum(0) - 1)[slot]  # each row's place among the agents present
        order = torch.argsort(slot, stable=True)
        starts = counts.cumsum(0) - counts
        rank = torch.empty_like(slot)
        rank[order] = torch.arange(n, device=slot.device) - starts[slot[order]]
        width = int(counts.max()) if n else 0
        at = group * width + rank  # each row's place in the block, flattened
        g = len(agents)
        block = x.new_zeros((g * width, *x.shape[1:])).index_copy(0, at, x)
        lengths = counts[agents].tolist()
        y = self._block(block.view(g, width, *x.shape[1:]),
                        None if g == self.agents else agents, lengths)
        return y.reshape(g * width, *y.shape[2:]).index_select(0, at)

    def _block(self, x: torch.Tensor, agents: torch.Tensor | None,
               lengths: list[int] | None) -> torch.Tensor:
        """``[g, m, in]`` -> ``[g, m, out]``: row block ``i`` through agent ``agents[i]``'s
        network (all agents in order when None); ``lengths``: the rows of each that are real
        (None: all), the rest padding."""
        for i, (kind, module) in enumerate(self.steps):
            if kind == "linear":
                weight = _pick(module.weight, agents).transpose(1, 2)
                if module.bias is None:
                    x = torch.bmm(x, weight)
                else:
                    x = torch.baddbmm(_pick(module.bias, agents).unsqueeze(1), x, weight)
            elif kind == "norm":
                x = nn.functional.layer_norm(x, module.normalized_shape, eps=module.eps)
                if module.weight is not None:
                    x = x * _pick(module.weight, agents).unsqueeze(1)
                if module.bias is not None:
                    x = x + _pick(module.bias, agents).unsqueeze(1)
            elif kind == "elementwise":
                x = module(x)
            elif kind == "log_std":
                log_std = _pick(module.log_std, agents).unsqueeze(1)
                x = torch.cat([x, log_std.expand(*x.shape[:2], log_std.shape[-1])], dim=2)
            elif kind == "vmap":
                try:
                    x = _vmapped(module, x, agents)
                except (RuntimeError, NotImplementedError, ValueError):
                    # vmap cannot run this module (data-dependent control flow, an op with no
                    # batching rule): from now on it runs once per agent
                    self.steps[i] = ("loop", module)
                    x = _looped(module, x, agents, lengths, self.agents)
            else:
                x = _looped(module, x, agents, lengths, self.agents)
        return x

    def agent(self, j: int) -> nn.Module:
        """Agent ``j``'s network as a plain module of its own (for export)."""
        net = copy.deepcopy(self.net)
        with torch.no_grad():
            for name, t in self.net.named_parameters():
                _replace(net, name, nn.Parameter(t[j].clone(), t.requires_grad))
            for name, b in self.net.named_buffers():
                _replace(net, name, b[j].clone())
        return net


def _stacked(nets: list[nn.Module]) -> nn.Module:
    """The first of ``nets`` with each parameter and buffer the stack of all of theirs."""
    template = nets[0]
    with torch.no_grad():
        for name, p in list(template.named_parameters()):
            stack = torch.stack([net.get_parameter(name) for net in nets])
            _replace(template, name, nn.Parameter(stack, p.requires_grad))
        for name, _ in list(template.named_buffers()):
            _replace(template, name, torch.stack([net.get_buffer(name) for net in nets]))
    return template


def _replace(root: nn.Module, name: str, value: torch.Tensor) -> None:
    owner, _, leaf = name.rpartition(".")
    module = root.get_submodule(owner)
    if isinstance(value, nn.Parameter):
        setattr(module, leaf, value)
    else:
        module.register_buffer(leaf, value, persistent=leaf not in module._non_persistent_buffers_set)


def _steps(net: nn.Module) -> list[tuple[str, nn.Module]]:
    """``net``'s parts in the order they run (Sequentials opened), each with how it runs over
    a block of agents."""
    if isinstance(net, nn.Sequential):
        return [step for part in net for step in _steps(part)]
    if type(net) is nn.Linear:
        return [("linear", net)]
    if type(net) is nn.LayerNorm and len(net.normalized_shape) == 1:
        return [("norm", net)]
    if type(net) in _ELEMENTWISE:
        return [("elementwise", net)]
    if type(net) is LogStd:
        return [("log_std", net)]
    return [("vmap", net)]


def _pick(t: torch.Tensor, agents: torch.Tensor | None) -> torch.Tensor:
    return t if agents is None else t[agents]


def _state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {**dict(module.named_parameters()), **dict(module.named_buffers())}


def _vmapped(module: nn.Module, x: torch.Tensor, agents: torch.Tensor | None) -> torch.Tensor:
    state = {name: _pick(t, agents) for name, t in _state(module).items()}

    def one(params: dict[str, torch.Tensor], rows: torch.Tensor) -> torch.Tensor:
        return functional_call(module, params, (rows,))

    return vmap(one, randomness="different")(state, x)


def _looped(module: nn.Module, x: torch.Tensor, agents: torch.Tensor | None,
            lengths: list[int] | None, k: int) -> torch.Tensor:
    """Each agent's real rows through its own slice of ``module`` (views, so that buffers a
    module updates in place, such as batch-norm statistics, are kept), padded again."""
    state = _state(module)
    ids = list(range(k)) if agents is None else agents.tolist()
    width = x.shape[1]
    outs = []
    for i, j in enumerate(ids):
        rows = width if lengths is None else lengths[i]
        y = functional_call(module, {name: t[j] for name, t in state.items()}, (x[i, :rows],))
        outs.append(nn.functional.pad(y, (0, 0) * (y.dim() - 1) + (0, width - rows)))
    return torch.stack(outs)


def stack_saved_nets(state: Any) -> Any:
    """A saved state (dicts and lists of them) with the weights of each per-agent network saved
    as one network per agent (``nets.<j>.<name>`` for agents ``j`` = 0, 1, ...) as the stacks an
    :class:`AgentStack` holds (``net.<name>``, ``[k, ...]``); all else as it was (the very
    objects, where nothing in them changed). A network shared by all agents (``nets.0.``
    alone) keeps its keys."""
    if isinstance(state, list | tuple):
        items = [stack_saved_nets(v) for v in state]
        if all(a is b for a, b in zip(items, state, strict=True)):
            return state
        return type(state)(*items) if hasattr(state, "_fields") else type(state)(items)
    if not isinstance(state, dict):
        return state
    agents: dict[str, dict[int, str]] = {}  # a weight's name -> each agent's key for it
    for key, value in state.items():
        found = _PER_AGENT_KEY.fullmatch(key) if isinstance(key, str) else None
        if found and isinstance(value, torch.Tensor):
            agents.setdefault(found[2], {})[int(found[1])] = key
    stacked = {name: [keys[j] for j in range(len(keys))] for name, keys in agents.items()
               if len(keys) > 1 and sorted(keys) == list(range(len(keys)))}
    inner = {key: stack_saved_nets(value) for key, value in state.items()}
    if not stacked and all(inner[key] is value for key, value in state.items()):
        return state
    dropped = {key for keys in stacked.values() for key in keys}
    out = copy.copy(state)
    out.clear()
    out.update({key: value for key, value in inner.items() if key not in dropped})
    out.update({f"net.{name}": torch.stack([state[key] for key in keys])
                for name, keys in stacked.items()})
    return out


# A weight of the module that held one network per agent, at the root of a module's state
_PER_AGENT_KEY = re.compile(r"nets\.(\d+)\.(.+)")


def stacked_optimizer_state(state: dict[str, Any], modules: list[nn.Module]) -> dict[str, Any]:
    """An optimiser's saved ``state`` for one group over ``modules``' parameters in that order,
    from before each per-agent network was stacked (its agents' parameters one agent after
    another) when it is that, else as it is. Each stacked parameter's moments are its agents'
    stacked; counts shared by them (Adam's ``step``) are the first agent's."""
    groups = state.get("param_groups", [])
    layout = [(m.agents if isinstance(m, AgentStack) else 1, list(m.parameters()))
              for m in modules]
    old = sum(k * len(params) for k, params in layout)
    if len(groups) != 1 or len(groups[0]["params"]) != old or old == sum(
            len(params) for _, params in layout):
        return state
    ids, saved = groups[0]["params"], state["state"]
    moments: dict[int, Any] = {}
    at = new = 0
    for k, params in layout:
        for i, p in enumerate(params):
            parts = [saved.get(ids[at + j * len(params) + i]) for j in range(k)]
            if all(part is not None for part in parts):
                moments[new] = {key: _stack_moment([part[key] for part in parts], key, p, k)
                                for key in parts[0]}
            new += 1
        at += k * len(params)
    return {"state": moments, "param_groups": [{**groups[0], "params": list(range(new))}]}


def _stack_moment(values: list[Any], key: str, param: torch.Tensor, k: int) -> Any:
    """One optimiser entry of a stacked parameter from its agents' entries: those shaped like
    one agent's parameter stacked, the rest (step counts) the first agent's."""
    first = values[0]
    if k > 1 and key != "step" and torch.is_tensor(first) and first.shape == param.shape[1:]:
        return torch.stack(values)
    return first

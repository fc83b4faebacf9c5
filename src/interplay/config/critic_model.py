"""``critic_model`` settings: a centralised critic's (or mixer's) network, which may attend
across the agents (``type: attention``), and which algorithms take such a critic.

The attention settings live here rather than in :class:`ModelSettings`: an actor sees one
agent, so ``algo.model`` and ``policies.<pid>.model`` never take them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from interplay.config.code import NamesCode, load_callable
from interplay.config.limits import MAX_COUNT, MAX_SIZE
from interplay.config.model import ModelSettings, check_type
from interplay.errors import ConfigError

ATTENTION = "attention"


class CriticModelSettings(ModelSettings):
    """A centralised critic's network: a :class:`ModelSettings`, or attention across agents."""

    type: Annotated[str, NamesCode("attr")] = "auto"
    """``auto`` (a CNN when the observation is an image the conv layers fit, else an MLP),
    ``mlp``, ``cnn``, ``module:Class`` (your ``torch.nn.Module``, as for ``algo.model``), or
    ``attention``: a transformer encoder over the agents, one token per trained agent (its
    observation, and its action where the critic values actions), absent and dead agents
    masked out; it serves any number of agents, whichever are present (``embed``, ``heads``,
    ``layers``; ``hidden`` is then the head after the attention)."""
    embed: int = Field(64, ge=1, le=MAX_SIZE)
    """Attention: width of each agent's token (a multiple of ``heads``)."""
    heads: int = Field(4, ge=1, le=MAX_SIZE)
    """Attention: heads of each attention layer."""
    layers: int = Field(2, ge=1, le=MAX_COUNT)
    """Attention: transformer encoder layers over the agents' tokens."""

    @field_validator("type")
    @classmethod
    def _a_network(cls, value: str) -> str:
        if value != ATTENTION:
            check_type(value)
        return value

    @model_validator(mode="after")
    def _heads_divide_embed(self) -> CriticModelSettings:
        if self.type == ATTENTION and self.embed % self.heads:
            raise ValueError(f"embed ({self.embed}) must be a multiple of heads ({self.heads}): "
                             "each head takes an equal share of a token")
        return self

    @property
    def attention(self) -> bool:
        return self.type == ATTENTION


_TAKES: dict[str, bool] = {}  # registered algorithms: whether each takes an attention critic


def declare_attention(algorithm: str, takes: bool) -> None:
    """Say whether the registered algorithm ``algorithm`` takes ``critic_model.type:
    attention``."""
    _TAKES[algorithm] = takes


def takes_attention(name: str) -> bool:
    """Whether the algorithm ``algo.name`` names declares it takes an attention critic (its
    class's ``attention_critic``)."""
    if name in _TAKES:
        return _TAKES[name]
    return ":" in name and bool(getattr(load_callable(name, "algo.name"), "attention_critic",
                                        False))


def refuse_attention(name: str, data: dict[str, Any], where: str = "algo") -> None:
    """Refuse ``critic_model.type: attention`` in the algorithm settings ``data`` (at
    ``where``) for an algorithm that does not take it, naming the key and those that do."""
    critic = data.get("critic_model")
    kind = critic.get("type") if isinstance(critic, dict) else getattr(critic, "type", None)
    if kind != ATTENTION or takes_attention(name):
        return
    takers = ", ".join(sorted(n for n, takes in _TAKES.items() if takes))
    raise ConfigError(f"{where}.critic_model.type: {name} does not take an attention critic "
                      f"(it has no centralised critic or mixer that attends across agents); "
                      f"algorithms that do: {takers}")


def attention_reads_agents(critic_model: CriticModelSettings | None, state: str) -> None:
    """Refuse an attention critic that would read the env's global state: its tokens are the
    agents' own observations."""
    if critic_model is not None and critic_model.attention and state == "env":
        raise ValueError("state: env gives the critic one global state, but "
                         "critic_model.type: attention reads one token per agent (its "
                         "observation); set algo.state: observations")

"""The ``model`` settings: which network a policy gets, and how its observations are prepared.

``algo.model`` holds them for every policy an algorithm trains (MADDPG, MATD3, ISAC, MASAC,
MAPPO and QMIX also have ``algo.critic_model``, :mod:`interplay.config.critic_model`);
``policies.<pid>.model`` holds a partial override, merged over ``algo.model`` for that policy. The networks themselves are built by :mod:`interplay.nets`.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal, Optional, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from interplay.config.code import NamesCode, load_callable
from interplay.config.limits import MAX_SIZE
from interplay.errors import ConfigError


class EncoderSettings(BaseModel):
    """How one entry of a Dict or Tuple observation is encoded before the hidden layers."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True,
                              use_attribute_docstrings=True, allow_inf_nan=False)
    type: Literal["auto", "cnn", "mlp"] = "auto"
    """``cnn`` (image entries only), ``mlp``, or ``auto``: a CNN for an image the conv layers
    fit, else an MLP."""
    hidden: list[int] = Field(default_factory=lambda: [64])
    """MLP: widths of its layers (``[]``: the entry's values as they are)."""
    channels: list[int] | None = None
    """CNN: output channels of each conv layer; none takes the model's ``channels``."""
    kernels: list[int] | None = None
    """CNN: kernel size of each conv layer; none takes the model's ``kernels``."""
    strides: list[int] | None = None
    """CNN: stride of each conv layer; none takes the model's ``strides``."""
    paddings: list[int] | None = None
    """CNN: zeros added on each side of the input of each conv layer; none takes the model's
    ``paddings``."""
    layout: Literal["auto", "hwc", "chw"] | None = None
    """Where this image keeps its channels; none takes the model's ``layout``."""

    @model_validator(mode="after")
    def _sizes(self) -> EncoderSettings:
        sizes = self.hidden + (self.channels or []) + (self.kernels or []) + (self.strides or [])
        if min(sizes, default=1) < 1:
            raise ValueError("hidden, channels, kernels and strides must be positive")
        if min(self.paddings or [0]) < 0:
            raise ValueError(f"paddings must be 0 or more, got {self.paddings}")
        sizes += self.paddings or []
        if max(sizes, default=0) > MAX_SIZE:
            raise ValueError(f"a width, channel count, kernel, stride or padding above "
                             f"{MAX_SIZE:,} (got {max(sizes):,}); no network of that size fits "
                             "in memory")
        return self


class ModelSettings(BaseModel):
    """The shape of one policy's networks."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True,
                              use_attribute_docstrings=True, allow_inf_nan=False)
    type: Annotated[str, NamesCode("attr")] = "auto"
    """``auto`` (a CNN when the observation is an image the conv layers fit, else an MLP),
    ``mlp``, ``cnn``, or ``module:Class``: your ``torch.nn.Module``, built as
    ``Class(observation_space, action_space, **kwargs)``, mapping a float batch
    ``[N, *observation_space.shape]`` (image bytes already scaled to [0, 1]) to features
    ``[N, F]``; interplay adds a linear head per output (``hidden`` is not used)."""
    hidden: list[int] = Field(default_factory=lambda: [64, 64])
    """Widths of the hidden layers (after the conv layers for a CNN)."""
    activation: Literal["tanh", "relu", "elu", "gelu", "silu"] = "tanh"
    """Nonlinearity after each hidden layer (conv layers always use ReLU)."""
    layer_norm: bool = False
    """Layer normalisation before each hidden layer's nonlinearity."""
    channels: list[int] = Field(default_factory=lambda: [32, 64, 64])
    """CNN: output channels of each conv layer."""
    kernels: list[int] = Field(default_factory=lambda: [8, 4, 3])
    """CNN: kernel size of each conv layer (one per entry of ``channels``)."""
    strides: list[int] = Field(default_factory=lambda: [4, 2, 1])
    """CNN: stride of each conv layer (one per entry of ``channels``)."""
    paddings: list[int] | None = None
    """CNN: zeros added on each side of the input of each conv layer (one per entry of
    ``channels``; none: no padding). ``kernel // 2`` with stride 1 keeps the height and width,
    so that every cell of a small board is seen by the same filters, edges included."""
    head: Literal["dense", "spatial"] = "dense"
    """How a network with one output per action (a policy's logits, DQN's Q-values) reads a
    CNN's map: ``dense`` flattens it into the hidden layers; ``spatial`` gives each column of
    the map (when the actions are as many as its columns, as a connect four board's) or each
    cell (as many as its cells, as a tic-tac-toe board's) its own output, from the same
    hidden layers over that column's or cell's features, so that a pattern on the board is
    read the same wherever it is. Give the conv layers paddings that keep the board's size.
    Critics (one output) stay dense."""
    mirror: bool = False
    """Make the network left-right symmetric, for a board game that looks the same in a
    mirror (connect four, tic-tac-toe): it reads the image and its mirror image (the width
    reversed) and averages the two answers, the mirror's put back in place (one output per
    column reversed, one per cell reversed along each row, a value as it is). What it learns
    from a position it knows of the mirrored position too. Takes one image observation and
    Discrete actions as many as the image's columns or cells (a critic over more than the
    image stays as it is); not with a recurrent cell; twice the network's cost."""
    layout: Literal["auto", "hwc", "chw"] = "auto"
    """Where an image observation keeps its channels: last (``hwc``) or first (``chw``);
    ``auto`` takes the smaller of the first and last axes, warns when that guess looks unlike
    a picture (not 1, 3 or 4 channels, or float planes), and asks when the two are equal and
    a CNN, a network of your own or ``resize`` reads the frames as images."""
    resize: list[int] | None = None
    """``[height, width]`` image observations are resized to (area averaging) before frame
    stacking; none keeps their size."""
    grayscale: bool = False
    """Turn RGB image observations into one luminance channel before frame stacking."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for a ``module:Class`` network's constructor."""
    encoders: dict[str, EncoderSettings] = Field(default_factory=dict)
    """A Dict or Tuple observation with image entries (Box of rank 2 or 3) is encoded entry by
    entry: by default a CNN per image entry and one MLP over the other entries, side by side,
    then ``hidden``. Give an entry (its key, or a Tuple's index) its own encoder here, e.g.
    ``{camera: {type: cnn, channels: [16, 32]}, state: {type: mlp, hidden: [32]}}``. With
    ``type: mlp`` every entry is flattened into one vector instead (image bytes scaled to
    [0, 1]) and ``encoders`` go unused."""
    recurrent: Literal["none", "gru", "lstm"] = "none"
    """A GRU or LSTM cell between the hidden layers and the head, so that the networks remember
    what came before in the episode; each agent's state is reset when its episode starts.
    IPPO, MAPPO and A2C put one in the actor and the critic; DQN, VDN and QMIX in the
    Q-networks, learning from replayed sequences after a burn-in (``algo.burn_in``). ``core``
    is another name for this key."""
    recurrent_size: int = Field(64, ge=1, le=MAX_SIZE)
    """Units of the recurrent cell."""
    seq_len: int = Field(32, ge=1, le=MAX_SIZE)
    """Longest sequence a recurrent update trains on: gradients flow back at most this many
    of an agent's steps. Sequences never span two episodes, and each starts from the state
    its first action was taken with; set it past the longest gap between seeing something
    and acting on it."""

    @field_validator("type")
    @classmethod
    def _a_network(cls, value: str) -> str:
        check_type(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _core_is_recurrent(cls, data: Any) -> Any:
        return one_name_for_recurrent(data)

    @model_validator(mode="after")
    def _consistent(self) -> ModelSettings:
        if any(w < 1 for w in self.hidden):
            raise ValueError(f"hidden widths must be positive, got {self.hidden}")
        sizes = (self.hidden + self.channels + self.kernels + self.strides + (self.resize or [])
                 + (self.paddings or []))
        if max(sizes, default=0) > MAX_SIZE:
            raise ValueError(f"a width, channel count, kernel, stride, padding or size above "
                             f"{MAX_SIZE:,} (got {max(sizes):,}); no network of that size fits "
                             "in memory")
        n = len(self.channels)
        if not n or len(self.kernels) != n or len(self.strides) != n:
            raise ValueError(
                f"channels, kernels and strides give one entry per conv layer and must have "
                f"the same, non-zero length; got {len(self.channels)}, {len(self.kernels)} "
                f"and {len(self.strides)}")
        if min(self.channels + self.kernels + self.strides) < 1:
            raise ValueError("channels, kernels and strides must be positive")
        if self.paddings is not None and len(self.paddings) != n:
            raise ValueError(f"paddings gives one entry per conv layer, as channels does; got "
                             f"{len(self.paddings)} for {n} conv layers")
        if min(self.paddings or [0]) < 0:
            raise ValueError(f"paddings must be 0 or more, got {self.paddings}")
        if self.resize is not None and (len(self.resize) != 2 or min(self.resize) < 1):
            raise ValueError(f"resize is [height, width] in pixels, got {self.resize}")
        return self


def one_name_for_recurrent(data: Any) -> Any:
    """``data`` with ``core`` given as ``recurrent``; where both are given (a file says one, an
    override the other), the one given last counts, as with any setting given twice."""
    if not isinstance(data, dict) or "core" not in data:
        return data
    keys = list(data)
    out = {k: v for k, v in data.items() if k not in ("core", "recurrent")}
    last = max(("core", "recurrent"), key=lambda k: keys.index(k) if k in data else -1)
    out["recurrent"] = data[last]
    return out


def check_type(value: str) -> None:
    if value in ("auto", "mlp", "cnn"):
        return
    if value == "attention":
        raise ValueError("attention attends across agents, so only a centralised critic or "
                         "mixer takes it: set algo.critic_model.type: attention (an actor sees "
                         "one agent)")
    module, sep, name = value.partition(":")
    if not sep or not module or not name:
        near = difflib.get_close_matches(value, ["auto", "mlp", "cnn"], n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        raise ValueError(f"{value!r} is not a network; {hint}use auto, mlp, cnn or "
                         "module:Class")


Critic = TypeVar("Critic", bound=ModelSettings)


def same_view_as_actors(critic_model: Critic) -> Critic:
    """Refuse critic settings that would prepare observations differently from the actors'
    (critics reuse the observations as the actors see them)."""
    for key in ("resize", "grayscale", "layout"):
        if getattr(critic_model, key) != ModelSettings.model_fields[key].default:
            raise ValueError(f"{key}: critics see the observations as the actors do; set "
                             f"algo.model.{key} instead")
    return critic_model


def _optional(name: str) -> Any:
    field = ModelSettings.model_fields[name]
    return (Optional[field.annotation], Field(None, description=field.description))  # noqa: UP045


class _Override(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _core_is_recurrent(cls, data: Any) -> Any:
        return one_name_for_recurrent(data)


ModelOverride = create_model(
    "ModelOverride", __base__=_Override,
    **{name: _optional(name) for name in ModelSettings.model_fields})
"""The keys a ``policies.<pid>.model`` override may give: those of :class:`ModelSettings`."""

RENAMED = {
    "net": "algo.model", "actor_net": "algo.model", "critic_net": "algo.critic_model",
    "policy_nets": "policies.<pid>.model (a partial override of algo.model)",
    "learning_delay": "algo.learning_starts", "learn_step": "algo.train_every",
}
"""Settings of the ``algo`` section that moved or were renamed, and where to."""


def refuse_renamed(data: dict[str, Any], fields: dict[str, Any], where: str = "algo") -> None:
    """Name the new key for an old network setting that ``fields`` does not have."""
    for old, new in RENAMED.items():
        if old in data and old not in fields:
            raise ConfigError(f"{where}.{old}: this setting is now {new}; rename the key "
                              f"(its values are the same)")


def model_for(algo: Any, override: dict[str, Any], pid: str,
              field: str = "model") -> ModelSettings | None:
    """``algo.<field>`` with policy ``pid``'s override merged over it; None when the algorithm
    has no such setting."""
    base = getattr(algo, field, None)
    if not isinstance(base, ModelSettings):
        return None
    if not override:
        return base
    try:
        return type(base).model_validate({**base.model_dump(), **override})
    except ValidationError as err:
        why = "; ".join(".".join(map(str, (f"policies.{pid}.model", *e["loc"]))) + ": "
                        + e["msg"].removeprefix("Value error, ") for e in err.errors())
        raise ConfigError(f"{why} (merged over algo.{field})") from None


_RECURRENT: dict[str, bool] = {}  # registered algorithms: whether each learns recurrent nets


def declare_recurrent(algorithm: str, recurrent: bool) -> None:
    """Say whether the registered algorithm ``algorithm`` learns recurrent networks."""
    _RECURRENT[algorithm] = recurrent


def learns_recurrent(name: str) -> bool:
    """Whether the algorithm ``algo.name`` names declares it learns recurrent networks (its
    class's ``supports_recurrent``)."""
    if name in _RECURRENT:
        return _RECURRENT[name]
    return ":" in name and bool(getattr(load_callable(name, "algo.name"), "supports_recurrent", False))


def check_models(cfg: Any) -> None:
    """Refuse, naming the key, what no network of this config can be: an override for an
    algorithm without networks, one that does not merge, a recurrent model where the
    algorithm cannot learn one."""
    algo = cfg.algo
    supports = learns_recurrent(algo.name)
    for field in ("model", "critic_model"):
        model = getattr(algo, field, None)
        if isinstance(model, ModelSettings) and model.recurrent != "none" and not supports:
            raise ConfigError(f"algo.{field}.recurrent: {algo.name} does not support "
                              f"recurrent networks yet; set recurrent: none or use "
                              f"{_recurrent_algorithms()}")
    for pid, policy in cfg.policies.items():
        if not policy.model:
            continue
        if not isinstance(getattr(algo, "model", None), ModelSettings):
            raise ConfigError(f"policies.{pid}.model: algorithm {algo.name} has no model "
                              "setting to override (it builds no networks from the config)")
        if policy.type != "trainable":
            raise ConfigError(f"policies.{pid}.model: policy {pid!r} is {policy.type}, not "
                              "trainable; only trained policies have networks")
        merged = model_for(algo, policy.model, pid)
        if merged is not None and merged.recurrent != "none" and not supports:
            raise ConfigError(f"policies.{pid}.model.recurrent: {algo.name} does not support "
                              f"recurrent networks yet; set recurrent: none or use "
                              f"{_recurrent_algorithms()}")


def _recurrent_algorithms() -> str:
    """The registered algorithms that learn recurrent networks, for errors."""
    names = sorted(name for name, yes in _RECURRENT.items() if yes)
    return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)

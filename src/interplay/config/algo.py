"""The ``algo`` section: each algorithm's settings model, found by ``algo.name``.

An algorithm declares its settings next to its code (a subclass of :class:`AlgoSettings`,
one docstring per field) and registers them under its name; the config's ``algo`` section is
then validated by that model, so every setting has one type, one default and one doc, and an
unknown setting is refused when the config is read. ``algo.name: module:Class`` names an
algorithm outside the package; its ``Settings`` class validates the section the same way.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from interplay.config.code import NamesCode, load_callable
from interplay.config.critic_model import declare_attention, refuse_attention
from interplay.config.limits import MAX_STEPS
from interplay.config.model import declare_recurrent, refuse_renamed
from interplay.errors import ConfigError


class AlgoSettings(BaseModel):
    """Settings shared by every algorithm; each algorithm's model adds its own fields."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True,
                              use_attribute_docstrings=True, allow_inf_nan=False)
    # Hyper-parameters an evolutionary search may mutate, each with the range it stays in
    # (``hpo.ranges`` narrows or moves them, within the field's own bounds).
    mutable: ClassVar[dict[str, tuple[float, float]]] = {}
    name: Annotated[str, NamesCode("attr")] = "random"
    """The algorithm: a registered name (docs/reference.md lists each with its settings) or
    ``module:Class`` for an algorithm of your own."""


class PrioritySettings(AlgoSettings):
    """Prioritised replay, for the learners that sample a replay buffer."""

    prioritized: bool = False
    """Draw replay rows in proportion to their TD error (prioritised replay), with importance
    weights on the loss; false draws uniformly."""
    priority_alpha: float = Field(0.6, ge=0, le=1)
    """How much the TD error sets a row's chance: 0 is uniform, 1 proportional."""
    priority_beta: float = Field(0.4, ge=0, le=1)
    """Importance-weight exponent at the start; it grows linearly to 1."""
    priority_beta_steps: int = Field(100_000, ge=1, le=MAX_STEPS)
    """Env steps over which ``priority_beta`` grows to 1."""
    priority_eps: float = Field(1e-6, gt=0, le=1.0)
    """Added to every |TD error|, so that no row is never drawn."""

    def beta(self, env_steps: int) -> float:
        """The importance-weight exponent after ``env_steps``."""
        done = min(1.0, env_steps / self.priority_beta_steps)
        return self.priority_beta + done * (1.0 - self.priority_beta)


class CriticStateSettings(AlgoSettings):
    """``algo.state`` for the learners whose centralised critics see every trained agent."""

    uses_env_state: ClassVar[bool] = True  # the env is built to keep its global state
    state: Literal["auto", "env", "observations"] = "observations"
    """What the centralised critics see in place of every trained agent's observation joined
    (``observations``): ``env`` the env's own ``state()`` (a PettingZoo env with a Box
    ``state_space``; refused before any step for an env without one, such as the built-in
    batched envs), ``auto`` the env's state where it has a flat one, else the observations.
    The agent's own observation, action and slot and every trained agent's action are there
    either way. The default keeps the critics of earlier runs and checkpoints as they were
    (on the MPE tasks the state is the observations joined)."""


SETTINGS: dict[str, type[AlgoSettings]] = {}


def register_settings(name: str, settings: type[AlgoSettings], recurrent: bool = False,
                      attention: bool = False) -> None:
    """Validate ``algo`` sections naming ``name`` with ``settings``; ``recurrent``: whether
    that algorithm learns recurrent networks (``model.recurrent``); ``attention``: whether it
    takes ``critic_model.type: attention``."""
    SETTINGS[name] = settings
    declare_recurrent(name, recurrent)
    declare_attention(name, attention)


def settings_class(name: Any) -> type[AlgoSettings]:
    """The settings model for ``algo.name``; a clear error for a name nothing answers to."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"algo.name: expected an algorithm name, got {name!r}")
    if name in SETTINGS:
        return SETTINGS[name]
    if ":" in name:
        cls = load_callable(name, "algo.name")
        settings = getattr(cls, "Settings", None)
        if not (isinstance(settings, type) and issubclass(settings, AlgoSettings)):
            raise ConfigError(
                f"algo.name: {name!r} has no Settings class deriving from "
                "interplay.AlgoSettings; subclass interplay.Algorithm and declare one")
        return settings
    near = difflib.get_close_matches(name, list(SETTINGS), n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    raise ConfigError(f"algo.name: unknown algorithm {name!r}{hint} "
                      f"(known: {', '.join(sorted(SETTINGS))}, or module:Class)")


def settings_for(data: Any) -> AlgoSettings:
    """Validate a raw ``algo`` mapping with its algorithm's model (pydantic errors pass up)."""
    if isinstance(data, AlgoSettings):
        return data
    if not isinstance(data, dict):
        raise ConfigError(f"algo: expected a mapping of settings, got {data!r}")
    name = data.get("name", "random")
    settings = settings_class(name)
    refuse_renamed(data, settings.model_fields)
    refuse_attention(name, data)
    return settings.model_validate(data)

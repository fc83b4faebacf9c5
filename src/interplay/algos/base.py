"""What an algorithm supplies to the training loop, and the registry of algorithms.

The loop owns the run (collect → store → update → log → test → checkpoint) and the storage
transitions go to. An algorithm builds one actor per policy it trains, says which storage it
learns from, when it wants to learn, and learns from that storage. It never touches envs,
loggers or files.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch

from interplay.config.algo import AlgoSettings, register_settings, settings_class
from interplay.config.code import load_callable
from interplay.data.storage import Storage
from interplay.errors import ConfigError
from interplay.run.actors import Actor
from interplay.run.mapping import PolicySpec
from interplay.run.transitions import Transitions


class WarmParts(NamedTuple):
    """A policy's learned pieces by name: each a module, running statistics (with
    ``state_dict``/``load_state_dict``) or a tensor."""

    actor: dict[str, Any]
    rest: dict[str, Any]


class Algorithm:
    name: ClassVar[str]
    Settings: ClassVar[type[AlgoSettings]] = AlgoSettings
    # What the algorithm can learn from, declared here once: config validation, the storage it
    # makes, the generated docs and README table, and the tests' matrix read these.
    action_kinds: ClassVar[frozenset[str]] = frozenset({"discrete", "multi_discrete", "box"})
    turn_based: ClassVar[bool] = True  # can learn from AEC (one mover per step) envs
    # Learns where agents leave (die) or join during an episode; false: it needs every trained
    # agent to act in every step, and stops at the first step where one does not.
    agents_come_and_go: ClassVar[bool] = True
    # Learning sees every trained agent at once (a centralised critic or a mixer of values).
    centralised: ClassVar[bool] = False
    supports_recurrent: ClassVar[bool] = False  # can learn recurrent networks (``model.recurrent``)
    # Takes ``critic_model.type: attention``: a centralised critic (or mixer) attending across
    # the agents, whichever of them are present.
    attention_critic: ClassVar[bool] = False
    off_policy: ClassVar[bool] = False  # learns from a replay of past transitions
    # Learns from transitions any policy played (a replay of single-agent rows), so a league
    # may hand it the moves its members made (``league.learn_from_members``).
    learns_from_members: ClassVar[bool] = False
    # Metrics of update() that give the algorithm's state (a buffer's size, a schedule's value)
    # rather than one update's outcome: a report shows their value at its last update, not a
    # mean over its updates. A name matches by itself or by its part before "/".
    gauges: ClassVar[frozenset[str]] = frozenset()
    # What each metric update() returns means, for the glossary (docs/metrics.md): a name, with
    # ``<policy>`` standing for the policy id after "/", mapped to one sentence.
    metric_docs: ClassVar[dict[str, str]] = {}
    # Algorithms of one family build the same networks for a policy, so one may start from
    # another's weights (``policies.<pid>.init_from``); empty: the algorithm's own name.
    family: ClassVar[str] = ""

    def __init__(self, settings: AlgoSettings, specs: dict[str, PolicySpec], device: str,
                 seed: int):
        self.settings = settings
        self.specs = specs
        self.device = device
        self.seed = seed
        # Trained policies that act with their current weights but are not updated
        # (``train.policies_to_train`` leaves them out); their transitions are still stored.
        self.frozen: set[str] = set()

    def actor(self, pid: str) -> Actor:
        """The actor for trainable policy ``pid``."""
        raise NotImplementedError

    def make_storage(self, num_envs: int) -> Storage | None:
        """The storage this algorithm learns from, for ``num_envs`` env copies (None: it learns
        nothing). The loop keeps it, fills it with every transition of the trained policies,
        and checkpoints it."""
        return None

    def collect(self, pid: str, batch: Transitions) -> None:
        """See the transitions the runner closed for ``pid`` in one step (they are stored
        by the loop; this is for what acting keeps, such as exploration noise per episode)."""

    def ready(self, storage: Any, env_steps: int) -> bool:
        """Whether to call :meth:`update` now. The loop asks once per step of the copies,
        after the step's transitions are stored, with the run's env steps so far."""
        return False

    def rollout_full(self, storage: Any) -> bool:
        """Whether ``storage`` holds a whole on-policy rollout: what an update would learn from
        now, and what a frozen learner drops instead (it never learns from it). False for a
        storage that is no rollout."""
        return False

    def steps_to_update(self, storage: Any) -> int | None:
        """Steps of the copies to take before :meth:`ready` can next be true, counted from
        now (at least 1); None if that depends on more than the steps (then env runners
        elsewhere act with weights that may lag the learner's)."""
        return None

    def update(self, storage: Any) -> dict[str, float]:
        """Learn from ``storage`` (what :meth:`make_storage` made); returns learner metrics."""
        return {}

    def warm_parts(self, pid: str) -> WarmParts:
        """Policy ``pid``'s learned pieces a warm start copies (``policies.<pid>.init_from``):
        what it acts with, and the rest (critics, targets, statistics). Optimisers and RNGs
        are never among them: a warm-started run learns with fresh ones."""
        raise ConfigError(f"policies.{pid}.init_from: algorithm {self.name!r} keeps no learned "
                          "weights to start from")

    def greedy_net(self, pid: str) -> Any:
        """Policy ``pid``'s greedy acting as a torch module (see :mod:`interplay.nets.greedy`),
        for ``interplay export``; its recurrent state size is its ``state_size`` (0: none)."""
        raise ConfigError(f"algorithm {self.name!r} cannot export its policies yet")

    @classmethod
    def family_name(cls) -> str:
        return cls.family or cls.name

    def state_dict(self) -> dict[str, Any]:
        return {}

    def frozen_state(self) -> dict[str, Any]:
        """The state a frozen copy (a league snapshot) is built from: :meth:`state_dict` less
        what only this learner's further training reads."""
        return self.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class NetActor:
    """The actor of one policy a learner trains: it acts with that policy's networks (which
    ``policy`` holds), and asks ``algo`` for the rest (device, exploration)."""

    squashed = False  # True: Box actions come in [-1, 1], which the runner maps onto the bounds
    wants_env_obs = False

    def __init__(self, algo: Any, policy: Any):
        self.algo = algo
        self.policy = policy


def read_state(mode: str, state_space: Any, reads: str) -> Any:
    """The env's global state space a learner reads with ``algo.state`` ``mode`` (None: it
    reads the agents' observations joined); ``reads`` says what reads it, for the error when
    ``env`` is asked of an env that keeps none."""
    if mode == "env" and state_space is None:
        raise ConfigError(f"algo.state is env ({reads} reads the env's global state), but the "
                          "env keeps none; set algo.state: auto or observations")
    return None if mode == "observations" else state_space


REGISTRY: dict[str, type[Algorithm]] = {}


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Make ``cls`` known by its ``name`` to configs (``algo.name``) and to the CLI."""
    REGISTRY[cls.name] = cls
    register_settings(cls.name, cls.Settings, recurrent=cls.supports_recurrent,
                      attention=cls.attention_critic)
    return cls


CAPABILITIES = ("action_kinds", "turn_based", "agents_come_and_go", "centralised",
                "supports_recurrent", "attention_critic", "off_policy", "learns_from_members")
"""The class attributes that say what an algorithm can learn from."""


def algorithm_class(name: str) -> type[Algorithm]:
    """The algorithm ``algo.name`` names: a registered one, or ``module:Class``."""
    if name in REGISTRY:
        return REGISTRY[name]
    settings_class(name)  # names what is wrong with an unknown or malformed name
    cls = load_callable(name, "algo.name")
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise ConfigError(f"algo.name: {name!r} is not a subclass of interplay.Algorithm")
    return cls


class LearnSchedule:
    """Learning rounds counted in env steps: the first once ``start`` env steps are done, then
    one per ``every`` env steps, however many copies step together. A round that falls due
    while there is nothing to learn from yet is passed over, not made up later."""

    def __init__(self, start: int, every: int):
        self.start, self.every = start, every
        self.env_steps = 0  # the run's env steps, as last told
        self.rounds = 0  # rounds taken or passed over

    def advance(self, env_steps: int) -> None:
        self.env_steps = env_steps

    def due(self) -> int:
        if self.env_steps < self.start:
            return 0
        return (self.env_steps - self.start) // self.every + 1 - self.rounds

    def take(self) -> int:
        """The rounds due now, marked as taken (or passed over)."""
        n = self.due()
        self.rounds += n
        return n

    def state_dict(self) -> dict[str, int]:
        return {"env_steps": self.env_steps, "rounds": self.rounds}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.env_steps, self.rounds = int(state["env_steps"]), int(state["rounds"])


def tensor(x: np.ndarray, device: str) -> torch.Tensor:
    """``x`` as a tensor on ``device``. The runner hands read-only views of its buffers
    (masks, say); torch wants memory it may write to, so those alone are copied."""
    if not (x.flags.c_contiguous and x.flags.writeable):
        x = np.require(x, requirements=("C", "W"))
    t = torch.from_numpy(x)
    return t if device == "cpu" else t.to(device)

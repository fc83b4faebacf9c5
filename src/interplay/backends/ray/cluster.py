"""The Ray backend: starting or joining Ray, and running work on it.

A Ray started here (``backend.address`` empty) runs on this machine only: every one of its
servers is bound to 127.0.0.1 and it has no dashboard. Joining a cluster (``auto`` or an
address) trusts that cluster with the config, the policies and the code the config names.
"""

from __future__ import annotations

import importlib.util
import math
import os
import warnings
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from interplay.config.schema import BackendConfig
from interplay.errors import ConfigError, UserError

T = TypeVar("T")
R = TypeVar("R")

INSTALL = "pip install 'interplay[ray]'"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


LEARNER_READY_S = 60.0
"""Seconds the learner's GPUs may take to be reserved on this node before the run stops."""


class RayMissingError(ConfigError):
    """``backend.name: ray`` on a machine without Ray."""


class WorkLostError(UserError, RuntimeError):
    """Work on Ray (an env runner, a search member) was lost more often than
    ``backend.max_restarts`` allows: its process or its node died."""


def require_ray() -> None:
    """Refuse the Ray backend, before any work, where Ray is not installed."""
    if importlib.util.find_spec("ray") is None:
        raise RayMissingError(
            f"backend.name: ray needs Ray, which is not installed here; install it with "
            f"{INSTALL}, or set backend.name: local")


def connect(cfg: BackendConfig, num_cpus: float | None = None, at_least: float = 0.0,
            runners: int = 0) -> bool:
    """Make sure this process is connected to Ray as ``cfg`` says; True if it started Ray here
    (then :func:`disconnect` stops it). A process already connected stays as it is.

    A Ray started here has ``num_cpus`` CPUs (none: this machine's count), and at least
    ``at_least`` (Ray's CPUs are a count to place work by, not a limit); it is started as
    ``local``, so that no ``RAY_ADDRESS`` in the environment sends the run elsewhere. Starting
    one for more env ``runners`` than this machine has cores warns: they would share them."""
    require_ray()
    if not cfg.address:
        # Ray binds its servers to the node's address; with clusters turned off (the
        # default on macOS and Windows) that address is the loopback one. Read by Ray at
        # import and when it starts, so set before either.
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():
        return False
    if cfg.address:
        try:
            ray.init(address=cfg.address, log_to_driver=True)
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise ConfigError(f"backend.address: cannot join the Ray cluster at "
                              f"{cfg.address!r}: {err}") from err
        return False
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False  # in case Ray was imported before the above
    cores = machine_cores()
    cpus = max(float(num_cpus if num_cpus is not None else cores), at_least)
    if runners > cores:
        warnings.warn(
            f"backend.num_env_runners: {runners} env runners on a machine with {cores} CPU "
            f"cores; each runner is a process, so they take turns on the cores and the run is "
            f"slower, not faster. Set backend.num_env_runners to {cores} or fewer (more copies "
            "each with backend.envs_per_runner), or join a cluster (backend.address)",
            stacklevel=2)
    ray.init(address="local", num_cpus=math.ceil(cpus), include_dashboard=False,
             configure_logging=False)
    address = ray.util.get_node_ip_address()
    if address not in LOOPBACK:
        ray.shutdown()
        raise ConfigError(
            f"backend.address: the Ray started on this machine would listen on {address}, not "
            "only on 127.0.0.1; start Ray yourself (ray start --head --node-ip-address "
            "127.0.0.1) and set backend.address: auto")
    return True


def machine_cores() -> int:
    """The CPU cores this process may run on (a container's or ``taskset``'s share)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def disconnect(started: bool) -> None:
    """Stop the Ray that :func:`connect` started (a joined one is left running)."""
    if started:
        import ray

        ray.shutdown()


def scheduling(cfg: BackendConfig) -> dict[str, Any]:
    """The Ray options that place runners and members as ``backend.placement`` says."""
    return {"scheduling_strategy": "SPREAD"} if cfg.placement == "spread" else {}


def pack_group(cfg: BackendConfig, runners: int, timeout_s: float) -> Any:
    """For ``backend.placement: pack``, a Ray placement group of one bundle per env runner on
    as few nodes as they fit on (Ray's default scheduling spreads work over nodes once a node is
    half busy); None for ``spread``. A bundle whose node is lost is placed again by Ray, so a
    replacement runner goes where its bundle now is. Raises TimeoutError when the cluster
    cannot place the bundles within ``timeout_s``."""
    if cfg.placement != "pack":
        return None
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    group = placement_group([{"CPU": cfg.cpus_per_runner}] * runners, strategy="PACK")
    ready, _ = ray.wait([group.ready()], timeout=timeout_s)
    if not ready:
        remove_placement_group(group)
        raise TimeoutError
    return group


def in_group(group: Any, index: int) -> dict[str, Any]:
    """The Ray options that put runner ``index`` in its bundle of ``group``."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return {"scheduling_strategy": PlacementGroupSchedulingStrategy(
        group, placement_group_bundle_index=index)}


def node_address() -> tuple[str, str]:
    """(node id, IP address) of the Ray node this process runs on."""
    import ray

    return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()


def check_learner_device(cfg: BackendConfig, device: str, asked: str) -> None:
    """Refuse GPUs for a learner that would learn on the CPU (``device``, resolved from
    ``train.device: asked``), before anything is built."""
    if cfg.gpus_for_learner <= 0 or device == "cuda":
        return
    import torch

    seen = "" if torch.cuda.is_available() else "; torch sees no CUDA device here"
    raise ConfigError(
        f"backend.gpus_for_learner is {cfg.gpus_for_learner:g}, but the learner would run on "
        f"{device} (train.device: {asked}{seen}); start the run on a node with a GPU and "
        "train.device: cuda (or auto), or set backend.gpus_for_learner: 0")


def reserve_learner(cfg: BackendConfig) -> Any:
    """Reserve ``backend.gpus_for_learner`` GPUs on this node (where the learner runs) as a Ray
    resource request, so that nothing else Ray places takes them; None when it asks for none.
    Refused, before any step, where the cluster or this node has too few."""
    if cfg.gpus_for_learner <= 0:
        return None
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    asked = cfg.gpus_for_learner
    total = ray.cluster_resources().get("GPU", 0)
    if total < asked:
        raise ConfigError(
            f"backend.gpus_for_learner: the learner asks for {asked:g} GPU(s) and the Ray "
            f"cluster has {total:g}; start the run on a node with a GPU (in a cluster whose "
            "Ray sees it), or set backend.gpus_for_learner: 0 to learn on the CPU")
    node, address = node_address()
    slot: Any = ray.remote(num_cpus=0, num_gpus=asked)(_LearnerSlot).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False)).remote()
    ready, _ = ray.wait([slot.ready.remote()], timeout=LEARNER_READY_S)
    if not ready:
        ray.kill(slot)
        raise ConfigError(
            f"backend.gpus_for_learner: this node ({address}, node {node[:12]}) has no "
            f"{asked:g} free GPU(s) for the learner within {LEARNER_READY_S:.0f} s (the cluster "
            f"has {total:g} in all); start the run on a node with free GPUs")
    return slot


class _LearnerSlot:
    """Holds the learner's GPUs on its node for as long as the run lives."""

    def ready(self) -> bool:
        return True


def map_members(fn: Callable[[T], R], items: Iterable[T], cfg: BackendConfig,
                **options: Any) -> list[R]:
    """``fn(item)`` for each item as Ray tasks, one per worker; results in the items' order.
    An item's error is raised as the error ``fn`` raised. A task whose worker or node dies is
    run again from its start, up to ``backend.max_restarts`` times; past that the work stops
    with :class:`WorkLostError`."""
    started = connect(cfg)
    import ray

    try:
        options = {**scheduling(cfg), "max_retries": cfg.max_restarts, **options}
        task: Any = ray.remote(**options)(_call)
        refs = [task.remote(fn, item) for item in items]
        out: list[R] = []
        for i, ref in enumerate(refs):
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayTaskError as err:
                cause = err.cause if isinstance(err.cause, BaseException) else None
                if cause is not None:
                    raise cause from err
                raise
            except ray.exceptions.RayError as err:  # its worker or node died
                raise WorkLostError(
                    f"backend: job {i} of {len(refs)} was lost {cfg.max_restarts + 1} time(s) "
                    f"({type(err).__name__}: {brief(err)}); backend.max_restarts: "
                    f"{cfg.max_restarts}") from None
        return out
    finally:
        disconnect(started)


def brief(err: BaseException, limit: int = 400) -> str:
    """Ray's message for ``err`` on one line (it names the node of a lost actor or task)."""
    text = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
    return (text[:limit] + " ...") if len(text) > limit else text or type(err).__name__


def _call(fn: Callable[[T], R], item: T) -> R:
    return fn(item)

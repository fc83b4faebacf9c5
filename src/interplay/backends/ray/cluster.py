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
from interplay.errors import ConfigError

T = TypeVar("T")
R = TypeVar("R")

INSTALL = "pip install 'interplay[ray]'"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class RayMissingError(ConfigError):
    """``backend.name: ray`` on a machine without Ray."""


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


def map_members(fn: Callable[[T], R], items: Iterable[T], cfg: BackendConfig,
                **options: Any) -> list[R]:
    """``fn(item)`` for each item as Ray tasks, one per worker; results in the items' order.
    An item's error is raised as the error ``fn`` raised."""
    started = connect(cfg)
    import ray

    try:
        task: Any = ray.remote(**options)(_call) if options else ray.remote(_call)
        refs = [task.remote(fn, item) for item in items]
        try:
            return ray.get(refs)
        except ray.exceptions.RayTaskError as err:
            cause = err.cause if isinstance(err.cause, BaseException) else None
            if cause is not None:
                raise cause from err
            raise
    finally:
        disconnect(started)


def _call(fn: Callable[[T], R], item: T) -> R:
    return fn(item)

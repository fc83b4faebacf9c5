"""Where work runs: in this process (``local``) or on Ray (``ray``).

Ray is imported only when a Ray backend is used, so ``import interplay`` never imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from interplay.config.schema import BackendConfig

T = TypeVar("T")
R = TypeVar("R")


def map_members(fn: Callable[[T], R], items: Iterable[T],
                backend: BackendConfig | str = "local", **options: Any) -> list[R]:
    """``fn(item)`` for each item, results in the items' order: one after the other in this
    process (``local``), or each in a Ray worker of its own (``ray``; ``options`` such as
    ``num_cpus`` or ``num_gpus`` go to each Ray task). ``fn`` and the items must pickle for Ray.
    """
    cfg = BackendConfig(name=backend) if isinstance(backend, str) else backend
    if cfg.name == "ray":
        from interplay.backends.ray.cluster import map_members as on_ray

        return on_ray(fn, items, cfg, **options)
    from interplay.backends.local import map_members as here

    return here(fn, items)


__all__ = ["map_members"]

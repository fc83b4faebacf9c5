"""Algorithms register themselves on import; importing this package loads every module in it,
so a new algorithm is one new file with a ``@register``-ed class."""

import importlib
import pkgutil

from interplay.algos.base import REGISTRY, Algorithm, algorithm_class, register

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["REGISTRY", "Algorithm", "algorithm_class", "register"]

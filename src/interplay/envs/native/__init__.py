"""Natively batched envs: every copy of a task stepped at once as arrays. Each module names its
envs itself (``@native_env``); importing this package loads every module in it."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

from interplay.envs.native.speaker_listener import SpeakerListener  # noqa: E402
from interplay.envs.native.spread import Spread  # noqa: E402

__all__ = ["SpeakerListener", "Spread"]

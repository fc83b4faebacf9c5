"""Natively batched envs: every copy of a task stepped at once as arrays."""

from interplay.envs.native.speaker_listener import SpeakerListener
from interplay.envs.native.spread import Spread
from interplay.envs.native.vmas_env import FAMILY as VMAS
from interplay.envs.native.vmas_env import vmas_class
from interplay.envs.registry import register_native, register_native_family

register_native("spread", Spread)
register_native("speaker_listener", SpeakerListener)
register_native_family(VMAS, vmas_class)  # vmas:<scenario>, VMAS imported when one is built

__all__ = ["SpeakerListener", "Spread"]

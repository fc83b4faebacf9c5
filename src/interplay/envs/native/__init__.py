"""Natively batched envs: every copy of a task stepped at once as NumPy arrays."""

from interplay.envs.native.speaker_listener import SpeakerListener
from interplay.envs.native.spread import Spread
from interplay.envs.registry import register_native

register_native("spread", Spread)
register_native("speaker_listener", SpeakerListener)

__all__ = ["SpeakerListener", "Spread"]

"""Networks and the pieces around them: layers, distributions, normalisation, and the networks
built from the ``model`` settings (:mod:`interplay.nets.build`)."""

from interplay.config.model import ModelSettings

__all__ = ["ModelSettings"]

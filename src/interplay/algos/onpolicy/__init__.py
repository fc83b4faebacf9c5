"""The on-policy actor-critic learners' shared parts: an algorithm over them (PPO, A2C) is
one file with its settings and its loss (see :mod:`interplay.algos.onpolicy.learner`)."""

from interplay.algos.onpolicy.learner import LossTerms, OnPolicy, OnPolicySettings
from interplay.algos.onpolicy.nets import ActorCritic
from interplay.algos.onpolicy.samples import Minibatch

__all__ = ["ActorCritic", "LossTerms", "Minibatch", "OnPolicy", "OnPolicySettings"]

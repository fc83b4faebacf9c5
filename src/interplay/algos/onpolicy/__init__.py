"""The on-policy actor-critic learners' shared parts: an algorithm over them (PPO, A2C) is
one file with its settings and its loss (see :mod:`interplay.algos.onpolicy.learner`)."""

from interplay.algos.onpolicy.learner import OnPolicy, OnPolicySettings

__all__ = ["OnPolicy", "OnPolicySettings"]

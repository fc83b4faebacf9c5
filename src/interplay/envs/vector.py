"""Vector envs: N copies of a multi-agent env behind one array interface.

Every vector env, whether it wraps PettingZoo copies or is natively batched, returns a
:class:`VecStep`. Agents are columns in the fixed order of ``agents`` (the env's
``possible_agents``); copies are rows. Copies reset themselves when their episode ends: the
step that ends it carries the final observations in ``final_obs`` and the flags in
``terminated``/``truncated``, while ``obs``/``acting`` already belong to the next episode.
A copy whose env raised is rebuilt and its partial episode abandoned: that step marks it in
``dropped`` (not ``episode_end``) and carries nothing more from the abandoned episode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from interplay.envs.batch import StepBuffers, VecStep, describe_spaces, state_dim, state_space_of
from interplay.envs.copies import EnvCopies
from interplay.seeding import copy_seeds

# What ``stats()`` reports, in every train row (counts since the run began), for the glossary.
STATS_DOCS = {
    "env_failures": "times an env copy raised in `step` or `reset` and was rebuilt",
    "episodes_dropped": "episodes under way that were abandoned (their copy raised, or its "
                        "worker died or hung); none of their transitions reached a learner "
                        "with `train.batch_mode: complete_episodes`",
    "worker_restarts": "`env.vectorization: async` workers that died or hung and were replaced "
                       "(always 0 for in-process copies)",
}


class SyncVecEnv:
    """``num_envs`` PettingZoo copies stepped one after another in this process.

    A copy whose env raises in ``step``/``reset`` is rebuilt (see :class:`EnvCopies`);
    ``max_failures`` failures of one copy in a row stop the run with the env's error.
    ``raw_obs`` keeps the env's own observations and infos in ``VecStep.raw_obs``/``infos``
    (a scripted policy reads them); without it they are None. ``state`` (``auto`` or ``env``,
    see :func:`state_space_of`) keeps the env's global state in ``VecStep.state`` and
    ``final_state`` where the env has one; ``kept_state`` is then its space, else None.
    """

    snapshot_supported = True

    def __init__(self, make: Callable[[], Any], num_envs: int = 1,
                 max_steps: int | None = None, max_failures: int = 3, raw_obs: bool = True,
                 state: str | None = None):
        if num_envs < 1:
            raise ValueError(f"env.num_envs must be at least 1, got {num_envs}")
        self._copies = EnvCopies(make, range(num_envs), max_steps, max_failures)
        self.copies = self._copies.copies
        self.num_envs = num_envs
        (self.agents, self.obs_views, self.action_views, self.observation_spaces,
         self.action_spaces) = describe_spaces(self.copies[0])
        self.turn_based = self.copies[0].turn_based
        self.kept_state = state_space_of(self.copies[0], state)
        self._buf = StepBuffers(self.agents, self.obs_views, self.action_views, num_envs,
                                keep_raw=raw_obs, state_dim=state_dim(self.kept_state))
        self._dropped = 0

    def reset(self, seed: int | None) -> VecStep:
        self._copies.reset(self._buf, copy_seeds(seed, self.num_envs))
        self._copies.take_failed()
        return self._buf.view()

    def step(self, actions: dict[str, np.ndarray]) -> VecStep:
        self._copies.step(self._buf, actions)
        if self._copies.failed:  # counted in _copies.failures; only workers report rows
            self._copies.take_failed()
            self._dropped += int(np.count_nonzero(self._buf.dropped))
        return self._buf.view()

    def stats(self) -> dict[str, int]:
        """Faults so far: env copies that raised, episodes abandoned, workers replaced."""
        return {"env_failures": self._copies.failures, "episodes_dropped": self._dropped,
                "worker_restarts": 0}

    def current_step(self) -> VecStep:
        """The step the copies are at now (what the last reset/step returned)."""
        self._buf.fill_obs()
        return self._buf.view()

    def skip_obs(self, agents: frozenset[str]) -> frozenset[str]:
        """From now on, leave the observations of ``agents`` unwritten where a block holds only
        theirs and they are known sound (see ``StepBuffers.skip_obs``): nobody reads them (a
        policy that acts without looking, nothing booked). :meth:`fill_obs` (and
        :meth:`current_step`) writes them after all, if they are wanted. Returns the agents whose
        observations may be left so."""
        return self._buf.skip_obs(agents)

    def fill_obs(self) -> None:
        """Write the observations the last step left unwritten (see :meth:`skip_obs`)."""
        self._buf.fill_obs()

    def group(self, groups: dict[str, tuple[str, ...]]) -> None:
        """Hand each group's ``[E, k, ...]`` blocks in ``VecStep.groups`` from now on."""
        self._buf.group(groups)

    def restored(self) -> None:
        """Rebuild what is derived from the copies and buffers after a snapshot was put back."""
        self._buf.recount()
        for copy in self.copies:
            copy.restored()
        # A turn-based env gives the mover's own observation again, as it is now: snapshots
        # taken before shared objects were kept as such lost it where a wrapper held it too.
        for copy, raw in zip(self.copies, self._buf.raw_obs if self._buf.keep_raw else [],
                             strict=False):
            if hasattr(copy, "observe"):
                raw.update({a: copy.observe(a) for a in raw})

    def state(self, e: int = 0) -> Any:
        return self.copies[e].state()

    def render(self, e: int = 0) -> Any:
        return self.copies[e].render()

    def close(self) -> None:
        self._copies.close()

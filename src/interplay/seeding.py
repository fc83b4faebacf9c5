"""Every seed a run uses, derived from ``train.seed``: one stream per named consumer, one seed
per env copy, and the global generators set once."""

from __future__ import annotations

import hashlib
import random

import numpy as np

SEED_LIMIT = 2**31
"""Every seed handed to an env is below this: many envs (Hanabi, OpenSpiel games) take only
non-negative 32-bit signed ints."""


def rng_for(seed: int, *names: str) -> np.random.Generator:
    """A generator derived from the run's seed and a name, so each consumer has its own stream."""
    words = [int.from_bytes(hashlib.sha256(n.encode()).digest()[:8], "little") for n in names]
    return np.random.default_rng(np.random.SeedSequence([seed, *words]))


def derived_seed(seed: int, *names: str) -> int:
    """A seed below 2^31 - 1 derived from the run's seed and a name (see :func:`rng_for`)."""
    return int(rng_for(seed, *names).integers(2**31 - 1))


def env_seed(seq: np.random.SeedSequence) -> int:
    """A seed for an env drawn from ``seq``, in ``[0, SEED_LIMIT)``."""
    return int(seq.generate_state(1)[0]) % SEED_LIMIT


def copy_seeds(seed: int | None, n: int) -> list[int | None]:
    """Independent, reproducible seeds for ``n`` copies derived from one seed, each below
    :data:`SEED_LIMIT`."""
    if seed is None:
        return [None] * n
    return [env_seed(s) for s in np.random.SeedSequence(seed).spawn(n)]


def runner_seed(seed: int, index: int, restarts: int = 0) -> int:
    """Env runner ``index``'s seed after ``restarts`` replacements: ``seed`` itself for the
    first runner as first built, one derived from it for every other."""
    if index == 0 and restarts == 0:
        return seed
    return derived_seed(seed, "runner", str(index), str(restarts))


def seed_everything(seed: int) -> None:
    """Python's, NumPy's and torch's global generators, for code that draws from them."""
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)

"""Settings every test shares."""

from __future__ import annotations

import os

# Float results that tests compare with records (tests/test_determinism.py) must not depend on
# which vector instructions this machine's CPU has: MKL and oneDNN pick kernels by CPU, and
# their AVX-512 kernels sum in another order than their AVX2 ones. Set before torch loads.
os.environ.setdefault("MKL_CBWR", "AVX2")
os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """Small networks run fastest on one thread, and do not fight other work for cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

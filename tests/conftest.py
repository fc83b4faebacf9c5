"""Settings every test shares."""

from __future__ import annotations

import os
import signal

# Float results that tests compare with records (tests/test_determinism.py) must not depend on
# which vector instructions this machine's CPU has: MKL and oneDNN pick kernels by CPU, and
# their AVX-512 kernels sum in another order than their AVX2 ones. Set before torch loads.
os.environ.setdefault("MKL_CBWR", "AVX2")
os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def signals_left_as_found():
    """A test that leaves SIGINT or SIGTERM ignored fails: every process started after it in
    the same worker would inherit the ignored signal (and a child that should stop on it
    would not)."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    ignored = [signal.Signals(s).name for s, was in before.items()
               if signal.getsignal(s) == signal.SIG_IGN and was != signal.SIG_IGN]
    assert not ignored, f"the test left {', '.join(ignored)} ignored in the test process"


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """Small networks run fastest on one thread, and do not fight other work for cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


SLOW_TIMEOUT_S = {"learning": 3600, "slow": 900}
"""Per test, for the tests so marked (the first mark that applies); pyproject's ``timeout`` is
for the rest."""


FIRST = ("test_ray_backend.py", "test_examples.py")
"""The files that take longest, mostly waiting on processes they start (Ray, example scripts):
begun first, so that with ``make test``'s two processes neither is left running one alone at
the end while the other has finished."""


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.path.name not in FIRST)  # stable: the rest keep their order
    no_gpu = None if torch.cuda.is_available() else pytest.mark.skip(
        reason="gpu: needs a CUDA device, and torch sees none")
    for item in items:
        if no_gpu and item.get_closest_marker("gpu"):
            item.add_marker(no_gpu)
        if item.get_closest_marker("timeout"):
            continue
        mark = next((m for m in SLOW_TIMEOUT_S if item.get_closest_marker(m)), None)
        if mark:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S[mark]))


LEARNING_OUT = "INTERPLAY_LEARNING_OUT"
"""Where ``learning_result`` appends its JSON lines: set by benchmarks/learning_checks.py."""


@pytest.fixture
def learning_result(request):
    """Records a learning check's outcome: ``learning_result(env=, algo=, steps=, score=,
    random=)`` appends one JSON line (with the seconds since the test started) to the file
    ``$INTERPLAY_LEARNING_OUT`` names, and prints it; the test still asserts its own bar."""
    import json
    import time

    start = time.perf_counter()

    def record(**fields) -> None:
        line = json.dumps({"check": request.node.name, **fields,
                           "seconds": round(time.perf_counter() - start, 1)})
        print(line)
        if os.environ.get(LEARNING_OUT):
            with open(os.environ[LEARNING_OUT], "a") as out:
                out.write(line + "\n")

    return record

"""The learning checks too long for ``make slow``: each trains on a fixed seed and asserts a
score above a random baseline, as a test marked ``learning`` (and ``slow``) in tests/.

    python benchmarks/learning_checks.py                  # all of them (about 20 minutes)
    python benchmarks/learning_checks.py --list           # their names
    python benchmarks/learning_checks.py league gru       # those whose name holds a word given

Prints one JSON line per check that ran: ``check`` (the test's name), ``env``, ``algo``,
``steps`` (env steps trained), ``score``, ``random`` (the random baseline the score is held
against) and ``seconds`` (the test's wall-clock time up to its score). Exits non-zero when a
check fails its bar or cannot run (pytest's exit status).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_VARIABLE = "INTERPLAY_LEARNING_OUT"  # tests/conftest.py's learning_result writes there


def pytest_args(names: list[str]) -> list[str]:
    """pytest's arguments for the learning checks whose name holds one of ``names`` (all
    when none is given)."""
    args = [sys.executable, "-m", "pytest", str(ROOT / "tests"), "-m", "learning", "-q",
            "-p", "no:cacheprovider"]
    if names:
        args += ["-k", " or ".join(names)]
    return args


def list_checks() -> int:
    done = subprocess.run([*pytest_args([]), "--collect-only"], cwd=ROOT, text=True,
                          capture_output=True)
    for line in done.stdout.splitlines():
        if "::" in line:
            print(line.split("::", 1)[1])
    return done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="words of the checks' names (pytest -k)")
    parser.add_argument("--list", action="store_true", help="list the checks and stop")
    args = parser.parse_args()
    if args.list:
        sys.exit(list_checks())
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "learning.jsonl"
        out.touch()
        env = {**os.environ, OUT_VARIABLE: str(out)}
        done = subprocess.run(pytest_args(args.names), cwd=ROOT, env=env, text=True,
                              capture_output=True)
        for line in out.read_text().splitlines():
            print(json.dumps(json.loads(line)), flush=True)
    if done.returncode != 0:
        print(done.stdout[-4000:], done.stderr[-2000:], sep="\n", file=sys.stderr)
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()

"""Every example runs: each ``examples/*.py`` script with ``--smoke``, the README's code and YAML.

The scripts run as a new user runs them (``python examples/NAME.py --smoke``, in a fresh
folder, in a process of their own), one after another; each must exit 0 within its limit.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from interplay.config.loading import load
from interplay.errors import ConfigError
from interplay.experiment.loop import train

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
LIMIT_S = 300  # a hung example fails; a slow, loaded machine does not


def scripts() -> list[Path]:
    return sorted(p for p in EXAMPLES.glob("*.py") if "--smoke" in p.read_text())


def test_every_example_is_a_script_with_smoke_or_a_module_a_script_imports():
    imported = {m for s in scripts() for m in re.findall(r"^import (\w+)", s.read_text(), re.M)}
    loose = [p.name for p in EXAMPLES.glob("*.py") if p not in scripts() and p.stem not in imported]
    assert len(scripts()) >= 4
    assert not loose, f"examples that neither take --smoke nor serve one that does: {loose}"


@pytest.mark.slow  # a fresh interpreter per script, over a minute in all: CI runs them with make slow
@pytest.mark.parametrize("script", scripts(), ids=lambda p: p.name)
def test_example_runs_with_smoke(script, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    try:
        done = subprocess.run([sys.executable, str(script), "--smoke"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{script.name} --smoke took more than {LIMIT_S} s")
    assert done.returncode == 0, f"{script.name} --smoke failed:\n{done.stdout}\n{done.stderr}"


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)


def test_readme_python_example_is_the_quickstart_script():
    readme = (ROOT / "README.md").read_text()
    assert (EXAMPLES / "quickstart.py").read_text() in _blocks(readme, "python"), (
        "the README's first Python example must be examples/quickstart.py, verbatim")
    assert len((EXAMPLES / "quickstart.py").read_text().splitlines()) <= 25


def test_readme_yaml_example_trains(tmp_path):
    block = next(b for b in _blocks((ROOT / "README.md").read_text(), "yaml") if "env:" in b)
    path = tmp_path / "readme.yaml"
    path.write_text(block)
    cfg = load([path], ["train.steps=300", "train.test_frequency=150", "train.test_episodes=2",
                        "env.num_envs=2", "log.console=false", "log.tensorboard=false",
                        "log.curve=false", "checkpoint.every=0"])
    result = train(cfg, tmp_path / "run")
    assert result.env_steps >= 300 and result.last_test


def test_every_yaml_block_in_the_docs_is_a_valid_config(tmp_path):
    """Tutorials and guides show YAML; every block is a config (or part of one) that loads."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        for i, block in enumerate(_blocks(page.read_text(), "yaml")):
            path = tmp_path / f"{page.stem}-{i + 1}.yaml"
            path.write_text(block)
            try:
                load([path])
            except ConfigError as err:
                pytest.fail(f"{page.name}, YAML block {i + 1}: {err}")
            checked += 1
    assert checked >= 5

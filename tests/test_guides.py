"""The guides for users of RLlib, AgileRL, RLHive and Phantom: each one's config trains.

Every ``configs/guides/*.yaml`` is named by its guide, loads, and trains for a few hundred env
steps with a test phase; the guides keep their rows for features still to come few, and mark
them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from interplay.config.loading import load
from interplay.experiment.loop import train

ROOT = Path(__file__).resolve().parent.parent
GUIDES = {"rllib": "from_rllib.md", "agilerl": "from_agilerl.md", "rlhive": "from_rlhive.md",
          "phantom": "from_phantom.md"}
SMOKE = ["train.steps=600", "train.target=null", "train.test_frequency=300", "train.test_episodes=2",
         "log.every=300", "log.console=false", "log.tensorboard=false", "log.curve=false",
         "checkpoint.every=0"]


def test_every_guide_config_has_a_guide_and_back():
    configs = {p.stem for p in (ROOT / "configs" / "guides").glob("*.yaml")}
    assert configs == set(GUIDES)
    for name, page in GUIDES.items():
        text = (ROOT / "docs" / page).read_text()
        assert f"configs/guides/{name}.yaml" in text, f"docs/{page} does not name its config"
        rows = [line for line in text.splitlines() if line.startswith("|")]
        assert len(rows) >= 15, f"docs/{page}: a guide maps their settings to ours, row by row"
        coming = [line for line in rows if "(coming)" in line]
        assert len(coming) <= 8, f"docs/{page}: {len(coming)} rows are still (coming)"


@pytest.mark.parametrize("name", sorted(GUIDES))
def test_guide_config_trains(name, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))  # PYTHONPATH=examples, as the guides say
    cfg = load([ROOT / "configs" / "guides" / f"{name}.yaml"], SMOKE)
    result = train(cfg, tmp_path / "run")
    assert result.env_steps >= 600
    assert result.last_test and result.last_test["episode_return_mean"] is not None


def test_guides_name_only_settings_that_exist_or_are_marked_coming():
    """A setting path in a guide's right-hand column is a real key, or the row says (coming)."""
    from interplay.docs import reference_md

    known = set(re.findall(r"\| `([a-z_]+(?:\.[a-z_<>]+)+)` \|", reference_md()))
    for page in GUIDES.values():
        checked = 0
        for line in (ROOT / "docs" / page).read_text().splitlines():
            cells = line.split(" | ")
            if not line.startswith("|") or len(cells) < 2 or "(coming)" in line:
                continue
            for key in re.findall(r"`((?:env|algo|policies|train|log|checkpoint)\.[a-z_.<>]+)",
                                  cells[-1]):
                assert key in known or any(k.startswith(key + ".") for k in known), (
                    f"docs/{page}: {key} is not a setting; fix the row or mark it (coming)")
                checked += 1
        assert checked >= 10, f"docs/{page}: only {checked} settings named"

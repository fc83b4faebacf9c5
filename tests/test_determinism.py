"""A fixed-seed run gives the same metrics rows and the same learned tensors as recorded.

The record in ``data/determinism.json`` was taken before the code was reorganised; any change
that alters what a seeded run computes (a reordered RNG draw, a different batch order, a
changed default) shows up here. Regenerate deliberately with
``MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 python tests/test_determinism.py --record`` (the
settings tests/conftest.py makes) and say why in the commit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from interplay import config, train

RECORD = Path(__file__).parent / "data" / "determinism.json"
VARIABLE = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}  # wall-clock figures

CASES: dict[str, dict] = {
    "ippo_spread": {
        "env": {"id": "spread", "num_envs": 8},
        "algo": {"name": "ippo", "rollout": 16, "epochs": 2, "minibatches": 2},
        "train": {"steps": 1024, "test_frequency": 512, "test_episodes": 2},
        "log": {"every": 256},
    },
    "mappo_mpe2_parallel": {
        "env": {"id": "mpe2.simple_spread_v3", "num_envs": 2, "kwargs": {"max_cycles": 10}},
        "algo": {"name": "mappo", "rollout": 16, "epochs": 1, "minibatches": 2},
        "train": {"steps": 320},
        "log": {"every": 160},
    },
    "dqn_tictactoe_aec": {
        "env": {"id": "pettingzoo.classic.tictactoe_v3", "num_envs": 2},
        "algo": {"name": "dqn", "batch_size": 16, "learning_starts": 40, "target_every": 20,
                 "train_every": 2, "exploration_steps": 20_000},
        "train": {"steps": 300, "self_play": True},
        "log": {"every": 100},
    },
    "matd3_spread_continuous": {
        "env": {"id": "spread", "num_envs": 4, "kwargs": {"continuous_actions": True}},
        "algo": {"name": "matd3", "batch_size": 32, "learning_starts": 64, "train_every": 4},
        "train": {"steps": 400},
        "log": {"every": 200},
    },
    "maddpg_speaker_listener": {
        "env": {"id": "speaker_listener", "num_envs": 4},
        "algo": {"name": "maddpg", "batch_size": 32, "learning_starts": 64, "train_every": 4},
        "train": {"steps": 400},
        "log": {"every": 200},
    },
}


def run_case(name: str, run_dir: Path) -> dict:
    data = config.merge(CASES[name], {
        "train": {"seed": 7, "device": "cpu"},
        "log": {"console": False, "tensorboard": False, "curve": False},
    })
    result = train(config.validate(data), run_dir)
    rows = [{k: v for k, v in r.items() if k not in VARIABLE} for r in result.rows]
    state = torch.load(result.checkpoint / "state.pt", weights_only=True)
    return {"rows": rows, "tensors": tensor_sums(state["algo"])}


def tensor_sums(tree, prefix: str = "") -> dict[str, float]:
    """Each float tensor in a nested state, by its path, as the sum of its absolute values."""
    out: dict[str, float] = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.update(tensor_sums(v, f"{prefix}/{k}"))
    elif isinstance(tree, list | tuple):
        for i, v in enumerate(tree):
            out.update(tensor_sums(v, f"{prefix}/{i}"))
    elif isinstance(tree, torch.Tensor) and tree.is_floating_point():
        out[prefix] = float(tree.double().abs().sum())
    return out


def close(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, int | float) and isinstance(b, int | float) and bool(
            np.isclose(a, b, rtol=1e-4, atol=1e-6))
    return a == b


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_seeded_run_matches_its_record(name, tmp_path):
    record = json.loads(RECORD.read_text())[name]
    got = run_case(name, tmp_path / name)
    assert len(got["rows"]) == len(record["rows"])
    for i, (row, want) in enumerate(zip(got["rows"], record["rows"], strict=True)):
        assert set(row) == set(want), f"row {i}: keys differ: {set(row) ^ set(want)}"
        bad = {k: (row[k], want[k]) for k in want if not close(row[k], want[k])}
        assert not bad, f"row {i} ({want['phase']}): got vs recorded {bad}"
    # Sums of learned tensors: the same numbers, wherever they now sit in the state.
    assert sorted(got["tensors"].values()) == pytest.approx(
        sorted(record["tensors"].values()), rel=1e-4, abs=1e-6)


if __name__ == "__main__" and "--record" in sys.argv:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = {name: run_case(name, Path(tmp) / name) for name in sorted(CASES)}
    RECORD.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(out)} runs in {RECORD}")

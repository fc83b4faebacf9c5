"""The rooms: what the loop hears from parts attached beside it, the short env ids of the toy
envs, and the capabilities every vector env declares."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest
from helpers import read_metrics, tiny_cfg

from interplay.envs.async_vec import AsyncVecEnv
from interplay.envs.batch import VecEnv
from interplay.envs.native.base import NativeEnv
from interplay.envs.native.vmas_env import VmasEnv
from interplay.envs.vector import SyncVecEnv
from interplay.experiment import attach
from interplay.experiment.attach import Attachment, register_attachment
from interplay.experiment.loop import train
from interplay.run.transitions import Transitions

SRC = Path(__file__).resolve().parent.parent / "src" / "interplay"


class Recorder(Attachment):
    """Counts what the loop tells it, and reports how many batches it saw."""

    def __init__(self) -> None:
        self.batches = self.kept_rows = self.checkpoints = self.closed = 0

    def kept(self, pid: str, batch: Transitions) -> Transitions:
        self.batches += 1
        return batch

    def report(self, env_steps: int) -> dict[str, float]:
        return {"custom/attached_batches": float(self.batches)}

    def checkpointed(self, run_dir: Path) -> None:
        assert (run_dir / "checkpoints").is_dir()
        self.checkpoints += 1

    def close(self) -> None:
        self.closed += 1


@pytest.fixture
def recorder(monkeypatch):
    made: list[Recorder] = []

    def build(cfg, exp):
        made.append(Recorder())
        return made

    monkeypatch.setattr(attach, "_BUILDERS", [])
    register_attachment(build)
    register_attachment(build)  # once, however often it registers
    return made


def test_the_loop_tells_attached_parts_of_rows_reports_checkpoints_and_its_end(tmp_path, recorder):
    # two copies of a two-agent spread, a one-layer net and one pass per update: what is
    # asserted is what the loop tells the part, not what the policy learns
    result = train(tiny_cfg("env.id=spread", "env.kwargs={N: 2}", "env.num_envs=2",
                            "train.steps=20", "log.every=10", "checkpoint.every=10",
                            "algo.name=ippo", "algo.rollout=5", "algo.epochs=1",
                            "algo.minibatches=1", "algo.model.hidden=[16]",
                            "train.batch_mode=truncate_episodes"),
                  tmp_path / "run")
    (part,) = recorder
    assert part.closed == 1 and part.checkpoints >= 2 and part.batches > 0
    rows = [r for r in read_metrics(tmp_path / "run") if r["phase"] == "train"]
    assert rows and all("custom/attached_batches" in r for r in rows)
    assert rows[-1]["custom/attached_batches"] == part.batches == result.last[
        "custom/attached_batches"]


def test_the_loop_names_no_league_and_no_storage_room_reaches_up():
    tree = ast.parse((SRC / "experiment" / "loop.py").read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not [n for n in names if "league" in n.lower() or "exploit" in n.lower()]
    for path in (SRC / "experiment" / "run_store").glob("*.py"):
        assert "interplay.population" not in path.read_text(), path.name


@pytest.mark.parametrize("short,home", [
    ("interplay.envs.swarm", "interplay.envs.toy.swarm"),
    ("interplay.envs.recall", "interplay.envs.toy.recall"),
    ("interplay.envs.pixels", "interplay.envs.toy.pixels"),
])
def test_short_env_ids_name_the_toy_envs(short, home):
    assert importlib.import_module(short).parallel_env is importlib.import_module(home).parallel_env


def test_short_player_ids_name_the_connect_four_players():
    from interplay.config.code import load_callable
    from interplay.envs.toy import connect_four

    assert load_callable("interplay.envs.connect_four:one_ply", "test") is connect_four.one_ply
    assert load_callable("interplay.envs.connect_four:two_ply", "test") is connect_four.two_ply


@pytest.mark.parametrize("cls", [SyncVecEnv, AsyncVecEnv, NativeEnv, VmasEnv])
def test_every_vector_env_declares_what_the_loop_asks_of_it(cls):
    members = {name for name, _ in inspect.getmembers(VecEnv)} | set(VecEnv.__annotations__)
    for name in ("snapshot_supported", "kept_state", "stats", "restored"):
        assert name in members
        assert hasattr(cls, name) or f"self.{name} =" in inspect.getsource(cls), (
            f"{cls.__name__} lacks {name}")

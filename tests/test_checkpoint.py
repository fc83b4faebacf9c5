import hashlib
import json
import os
import pickle
import random
import shlex
import signal
import struct
import subprocess
import sys
import textwrap
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch

import interplay
from interplay.experiment.run_store.checkpoint import (
    CheckpointError,
    latest_valid,
    list_checkpoints,
    load_checkpoint,
    resolve_checkpoint,
    save_checkpoint,
    verify_checkpoint,
)

NUMPY_DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "uint64", "float16",
                "float32", "float64", "complex128", ">i4", "<M8[ns]", "S5", "U3"]


def assert_identical(got, want, where="state"):
    """Equal values, equal types, and the same bits for arrays, tensors and floats."""
    assert type(got) is type(want), f"{where}: {type(got)} != {type(want)}"
    if isinstance(want, np.ndarray | np.generic):
        assert got.dtype == want.dtype and got.shape == want.shape, where
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes(), where
    elif isinstance(want, torch.Tensor):
        assert (got.dtype, got.shape, got.requires_grad) == (want.dtype, want.shape,
                                                             want.requires_grad), where
        assert torch.equal(got.detach().contiguous().reshape(-1).view(torch.uint8),
                           want.detach().contiguous().reshape(-1).view(torch.uint8)), where
    elif isinstance(want, float):
        assert struct.pack("<d", got) == struct.pack("<d", want), where
    elif isinstance(want, dict):
        assert list(got) == list(want), where
        for k in want:
            assert_identical(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_identical(g, w, f"{where}[{i}]")
    else:
        assert got == want, where


def sample_array(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * np.dtype(dtype).itemsize, dtype=np.uint8)
    # Random bits include NaNs with payloads and odd bool bytes; they must survive too.
    return raw.view(dtype).reshape(shape).copy()


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (4,), (2, 3)])
def test_numpy_arrays_round_trip_bit_exact(tmp_path, dtype, shape):
    arr = sample_array(dtype, shape)
    state = {"arr": arr, "scalar": arr.reshape(-1)[0] if arr.size else np.zeros((), dtype)[()]}
    path = save_checkpoint(tmp_path, 1, state)
    got, _ = load_checkpoint(path)
    assert_identical(got, state)
    assert got["arr"].flags.writeable


def test_mixed_state_and_rng_states_round_trip_exactly(tmp_path):
    random.seed(3)
    np_gen = np.random.default_rng(7)
    np_gen.random(5)
    mt = np.random.Generator(np.random.MT19937(1))
    torch.manual_seed(5)
    param = torch.nn.Parameter(torch.randn(3, 2))
    state = {
        "model": OrderedDict(w=param, b=torch.zeros(2, dtype=torch.bfloat16)),
        "counts": torch.arange(5, dtype=torch.int64)[::2],
        "flags": torch.tensor([True, False]),
        "obs_norm": {"mean": np.linspace(0, 1, 4, dtype=np.float32), "n": np.int64(2**40)},
        "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        "strided": np.arange(10, dtype=np.int16)[::3],
        "structured": np.array([(1, 2.5)], dtype=[("a", "<i4"), ("b", "<f8")]),
        "nested": [(1, "two", None, True), [np.bool_(True), np.float64(-0.0)], ()],
        "scalars": {"nan": float("nan"), "inf": float("-inf"), "big": 2**100, "neg": -(2**70),
                    "bytes": b"\x00\xff", "complex": 1 - 2j, 3: "int key", ("a", 1): "tuple key"},
        "ids": {"agent_0", "agent_1"},
        "__interplay__": {"__interplay__": "looks like a tag", "x": np.ones(2)},
        "python_rng": random.getstate(),
        "numpy_rng": np_gen.bit_generator.state,
        "mt_rng": mt.bit_generator.state,
        "torch_rng": torch.get_rng_state(),
        "dtype": torch.float16,
        "size": torch.Size([2, 3]),
    }
    path = save_checkpoint(tmp_path, 42, state)
    got, manifest = load_checkpoint(path)
    assert_identical(got, state)
    assert manifest["step"] == 42

    want_py, want_np, want_torch = random.random(), np_gen.random(), torch.rand(3)
    random.setstate(got["python_rng"])
    restored = np.random.default_rng()
    restored.bit_generator.state = got["numpy_rng"]
    torch.set_rng_state(got["torch_rng"])
    assert (random.random(), restored.random()) == (want_py, want_np)
    assert torch.equal(torch.rand(3), want_torch)


def test_layout_and_manifest(tmp_path):
    path = save_checkpoint(tmp_path, 42, {"x": torch.ones(2)})
    assert path == tmp_path / "checkpoints" / "step_000000000042"
    assert sorted(p.name for p in path.iterdir()) == ["manifest.json", "state.pt"]
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["format_version"] == 1 and manifest["step"] == 42
    assert manifest["versions"]["interplay"] == interplay.__version__
    assert manifest["versions"]["torch"] == torch.__version__
    assert manifest["versions"]["numpy"] == np.__version__
    assert manifest["versions"]["python"].startswith(f"{sys.version_info[0]}.")
    assert manifest["created"].endswith("+00:00")
    data = (path / "state.pt").read_bytes()
    assert manifest["files"] == {
        "state.pt": {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}}
    assert verify_checkpoint(path) == manifest


def test_checkpoint_path_may_be_folder_or_state_file(tmp_path):
    path = save_checkpoint(tmp_path, 1, {"x": 1})
    assert resolve_checkpoint(path / "state.pt") == path
    assert load_checkpoint(path / "state.pt")[0] == load_checkpoint(path)[0] == {"x": 1}
    with pytest.raises(CheckpointError, match="run folder"):
        load_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        (tmp_path / "notes.txt").write_text("hi")
        load_checkpoint(tmp_path / "notes.txt")


def flip_a_bit(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))


@pytest.mark.parametrize(("damage", "damaged_file", "message"), [
    (lambda p: p.unlink(), "state.pt", "missing"),
    (lambda p: p.write_bytes(p.read_bytes()[:-10]), "state.pt", "truncated"),
    (flip_a_bit, "state.pt", "sha256"),
    (lambda p: p.unlink(), "manifest.json", "missing"),
    (lambda p: p.write_bytes(p.read_bytes()[:20]), "manifest.json", "damaged"),
    (lambda p: p.write_text('{"files": 3}'), "manifest.json", "damaged"),
])
def test_damaged_checkpoint_is_refused_naming_the_file(tmp_path, damage, damaged_file, message):
    path = save_checkpoint(tmp_path, 7, {"w": torch.randn(100)})
    damage(path / damaged_file)
    with pytest.raises(CheckpointError, match=message) as info:
        load_checkpoint(path)
    assert str(path / damaged_file) in str(info.value)


def test_manifest_may_not_point_outside_the_folder(tmp_path):
    path = save_checkpoint(tmp_path, 1, {"x": 1})
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"]["../../secret"] = {"size": 0, "sha256": ""}
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="outside the checkpoint"):
        load_checkpoint(path)


def test_newer_format_is_refused(tmp_path):
    path = save_checkpoint(tmp_path, 1, {"x": 1})
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["format_version"] = 99
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="upgrade interplay"):
        load_checkpoint(path)


class RunsCode:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {shlex.quote(str(self.marker))}",)


def rewrite_manifest(folder: Path) -> None:
    manifest = json.loads((folder / "manifest.json").read_text())
    data = (folder / "state.pt").read_bytes()
    manifest["files"]["state.pt"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.skipif(os.name != "posix", reason="the payload uses the shell's touch")
@pytest.mark.parametrize("writer", ["pickle", "torch.save"])
def test_state_that_would_run_code_is_refused_and_not_run(tmp_path, writer):
    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(RunsCode(probe)))
    assert probe.exists(), "the payload must really run code when unpickled unsafely"

    marker = tmp_path / "pwned"
    path = save_checkpoint(tmp_path / "run", 1, {"x": 1})
    if writer == "pickle":
        (path / "state.pt").write_bytes(pickle.dumps({"x": RunsCode(marker)}, protocol=2))
    else:
        torch.save({"x": RunsCode(marker)}, path / "state.pt")
    rewrite_manifest(path)
    with pytest.raises(CheckpointError, match="refused to load.*system") as info:
        load_checkpoint(path)
    assert str(path / "state.pt") in str(info.value)
    assert not marker.exists()


def test_failed_save_keeps_earlier_checkpoints_and_leaves_no_half_folder(tmp_path, monkeypatch):
    first = save_checkpoint(tmp_path, 1, {"x": torch.ones(3)})

    def half_write(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", half_write)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, 2, {"x": torch.zeros(3)})
    monkeypatch.undo()

    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == [first.name]
    assert list_checkpoints(tmp_path) == [first] and latest_valid(tmp_path) == first
    assert torch.equal(load_checkpoint(first)[0]["x"], torch.ones(3))


KILLED_SAVE = """
import os, signal, sys, torch
from pathlib import Path
from interplay.experiment.run_store.checkpoint import save_checkpoint

def killed_mid_write(obj, f, *args, **kwargs):
    f.write(b"PK partial bytes")
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)

torch.save = killed_mid_write
save_checkpoint(Path(sys.argv[1]), 2, {"x": torch.zeros(3)})
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_save_killed_mid_write_keeps_earlier_checkpoints(tmp_path):
    first = save_checkpoint(tmp_path, 1, {"x": torch.ones(3)})
    env = {**os.environ, "PYTHONPATH": str(Path(interplay.__file__).parents[1])}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(KILLED_SAVE), str(tmp_path)],
                          env=env, capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()

    leftovers = [p.name for p in (tmp_path / "checkpoints").iterdir() if p != first]
    assert len(leftovers) == 1 and leftovers[0].startswith(".tmp-")
    assert list_checkpoints(tmp_path) == [first] and latest_valid(tmp_path) == first
    assert torch.equal(load_checkpoint(first)[0]["x"], torch.ones(3))

    second = save_checkpoint(tmp_path, 2, {"x": torch.zeros(3)})
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [first.name,
                                                                             second.name]


def test_unsupported_object_is_refused_before_writing(tmp_path):
    with pytest.raises(TypeError, match=r"state\['algo'\]\['opt'\]: builtins.object"):
        save_checkpoint(tmp_path, 1, {"algo": {"opt": object()}})
    with pytest.raises(TypeError, match="Python objects"):
        save_checkpoint(tmp_path, 1, {"a": np.array([{}], dtype=object)})
    with pytest.raises(TypeError, match="keys"):
        save_checkpoint(tmp_path, 1, {np.int64(1): 2})
    assert list_checkpoints(tmp_path) == []


def test_list_is_by_step_and_ignores_other_entries(tmp_path):
    for step in (1000, 2, 10**13):
        save_checkpoint(tmp_path, step, {"step": step})
    (tmp_path / "checkpoints" / ".tmp-step_000000000005-x").mkdir()
    (tmp_path / "checkpoints" / "step_000000000009").write_text("a file, not a folder")
    assert [load_checkpoint(p)[0]["step"] for p in list_checkpoints(tmp_path)] == [2, 1000, 10**13]
    assert list_checkpoints(tmp_path / "missing") == []
    assert latest_valid(tmp_path / "missing") is None


def test_latest_valid_skips_damaged_with_a_warning(tmp_path):
    paths = [save_checkpoint(tmp_path, s, {"s": s}) for s in (1, 2, 3)]
    flip_a_bit(paths[2] / "state.pt")
    (paths[1] / "manifest.json").unlink()
    with pytest.warns(UserWarning) as record:
        assert latest_valid(tmp_path) == paths[0]
    messages = [str(w.message) for w in record]
    assert len(messages) == 2
    assert str(paths[2]) in messages[0] and "sha256" in messages[0]
    assert str(paths[1]) in messages[1] and "missing" in messages[1]

    flip_a_bit(paths[0] / "state.pt")
    with pytest.warns(UserWarning):
        assert latest_valid(tmp_path) is None


def test_keep_prunes_oldest_but_never_the_new_one(tmp_path):
    for step in range(1, 6):
        save_checkpoint(tmp_path, step, {"s": step}, keep=2)
    assert [p.name[-1] for p in list_checkpoints(tmp_path)] == ["4", "5"]
    save_checkpoint(tmp_path, 1, {"s": 1}, keep=2)  # an older step, as after a resume
    assert [p.name[-1] for p in list_checkpoints(tmp_path)] == ["1", "5"]
    assert [p.name for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".")] == []
    with pytest.raises(ValueError, match="keep"):
        save_checkpoint(tmp_path, 9, {}, keep=0)
    with pytest.raises(ValueError, match="step"):
        save_checkpoint(tmp_path, -1, {})


def test_saving_a_step_again_replaces_it(tmp_path):
    save_checkpoint(tmp_path, 3, {"x": 1})
    path = save_checkpoint(tmp_path, 3, {"x": 2})
    assert list_checkpoints(tmp_path) == [path]
    assert load_checkpoint(path)[0] == {"x": 2}
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [path.name]


def test_a_damaged_checkpoint_does_not_count_toward_keep(tmp_path):
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, {"s": step}, keep=2)
    flip_a_bit(tmp_path / "checkpoints" / "step_000000000003" / "state.pt")
    save_checkpoint(tmp_path, 4, {"s": 4}, keep=2)
    # 3 is damaged: it is left alone, and the good 2 stays as the second of the two to keep
    assert [p.name[-1] for p in list_checkpoints(tmp_path)] == ["2", "3", "4"]
    assert load_checkpoint(list_checkpoints(tmp_path)[0])[0] == {"s": 2}
    (tmp_path / "checkpoints" / "step_000000000004" / "manifest.json").unlink()
    save_checkpoint(tmp_path, 5, {"s": 5}, keep=2)
    assert [p.name[-1] for p in list_checkpoints(tmp_path)] == ["2", "3", "4", "5"]
    assert latest_valid(tmp_path).name.endswith("5")
    save_checkpoint(tmp_path, 6, {"s": 6}, keep=2)  # two good ones: all older ones go
    assert [p.name[-1] for p in list_checkpoints(tmp_path)] == ["5", "6"]


def test_with_keep_1_a_damaged_newer_checkpoint_keeps_nothing_good_from_going(tmp_path):
    save_checkpoint(tmp_path, 1, {"s": 1}, keep=1)
    save_checkpoint(tmp_path, 3, {"s": 3}, keep=1)
    (tmp_path / "checkpoints" / "step_000000000003" / "state.pt").write_bytes(b"")
    save_checkpoint(tmp_path, 2, {"s": 2}, keep=1)  # as after resuming from step 1
    assert [load_checkpoint(p)[0] for p in list_checkpoints(tmp_path)[:1]] == [{"s": 2}]


def test_an_env_whose_infos_hold_python_object_arrays_checkpoints_and_resumes_exactly(tmp_path):
    from helpers import read_metrics

    from interplay.config.loading import load
    from interplay.experiment.loop import resume, train

    settings = ["env.id=broken_envs:object_info", "env.num_envs=2", "log.every=40",
                "log.console=false", "log.curve=false", "log.tensorboard=false",
                "algo.name=ippo", "algo.rollout=10"]
    run = tmp_path / "run"
    train(load([], [*settings, "train.steps=100", "checkpoint.every=40"]), run)
    assert (run / "checkpoints" / "step_000000000100").is_dir()
    resume(run, ["train.steps=200"])
    straight = train(load([], [*settings, "train.steps=200"]), tmp_path / "straight")
    timing = {"wall_s", "env_steps_per_s", "run_env_steps_per_s"}
    strip = lambda rs: [{k: v for k, v in r.items() if k not in timing} for r in rs]  # noqa: E731
    assert strip(read_metrics(run)) == strip(straight.rows)


class _Holder:
    def __init__(self, shared, other):
        self.a = shared
        self.b = shared if other is None else other
        self.pair = (shared, 1)


def test_an_object_held_in_two_places_is_restored_as_one():
    from interplay.envs.snapshot import capture, restore

    shared = {"board": np.arange(4.0), "turn": "p1"}
    snap = capture(_Holder(shared, None))
    fresh = _Holder({"board": np.zeros(4)}, {"other": 1})  # two objects where there was one
    restore(fresh, snap)
    assert fresh.a is fresh.b and fresh.pair[0] is fresh.a
    assert fresh.a["turn"] == "p1" and np.array_equal(fresh.a["board"], np.arange(4.0))


def _as_before_references(snap):
    """A snapshot as taken before shared objects were recorded as references to one."""
    from interplay.envs.snapshot import KEEP, REF

    if isinstance(snap, dict):
        return {KEEP: True} if REF in snap else {k: _as_before_references(v) for k, v in snap.items()}
    if isinstance(snap, list):
        return [_as_before_references(v) for v in snap]
    return snap


@pytest.mark.parametrize("old_snapshot", [False, True])
@pytest.mark.parametrize("moves", [0, 1, 2, 5])
def test_a_turn_based_envs_own_observations_come_back_with_its_snapshot(moves, old_snapshot):
    """PettingZoo's wrappers keep the last observation they gave, which is also the one kept
    for scripted players: after a restore both must be the observation of the board as it is,
    for whichever player moves next."""
    from interplay.envs.registry import env_factory
    from interplay.envs.snapshot import capture, restore
    from interplay.envs.vector import SyncVecEnv

    make = env_factory("pettingzoo.classic.connect_four_v3")
    env = SyncVecEnv(make, num_envs=3, raw_obs=True)
    env.reset(seed=4)
    for k in range(moves):
        env.step({a: np.full(3, (2, 3, 4)[k % 3]) for a in env.agents})
    before = env.current_step().raw_obs
    snap = _as_before_references(capture(env)) if old_snapshot else capture(env)
    fresh = SyncVecEnv(make, num_envs=3, raw_obs=True)
    fresh.reset(seed=99)
    restore(fresh, snap)
    fresh.restored()
    after = fresh.current_step().raw_obs
    for old, new in zip(before, after, strict=True):
        assert list(old) == list(new)
        for agent, obs in old.items():
            assert np.array_equal(obs["observation"], new[agent]["observation"])
            assert np.array_equal(obs["action_mask"], new[agent]["action_mask"])
    env.close()
    fresh.close()

"""Checkpoints: one folder per step, written atomically and checked before they are loaded.

``run_dir/checkpoints/step_000000001000/`` holds ``state.pt`` and ``manifest.json`` (versions,
step, time, and the sha256 and size of every file). Loading never unpickles arbitrary objects:
only ``json`` and ``torch.load(weights_only=True)`` read these files.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import operator
import os
import pickle
import platform
import re
import secrets
import shutil
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from interplay.errors import UserError
from interplay.experiment.run_store.statecodec import decode, encode
from interplay.nets.agents import stack_saved_nets

FORMAT_VERSION = 1
STATE_FILE = "state.pt"
MANIFEST_FILE = "manifest.json"
_STEP_DIR = re.compile(r"step_(\d{12,})")
_TMP_PREFIX = ".tmp-"
_OLD_PREFIX = ".old-"


class CheckpointError(UserError):
    """A checkpoint is missing, damaged, or holds something that will not be loaded."""


class UnsavableStateError(CheckpointError, TypeError):
    """The state holds a value a checkpoint cannot store (a lock, an open file...)."""


def save_checkpoint(run_dir: Path, step: int, state: dict, keep: int | None = None) -> Path:
    """Write ``state`` as the checkpoint for ``step`` and return its folder.

    The folder appears complete or not at all. With ``keep``, the oldest checkpoints beyond
    ``keep`` are removed afterwards, never the one just written; only checkpoints that verify
    count toward ``keep``.
    """
    step = operator.index(step)
    if step < 0:
        raise ValueError(f"checkpoint step must be >= 0, got {step}")
    if keep is not None and keep < 1:
        raise ValueError(f"checkpoint keep must be >= 1 or None, got {keep}")
    try:
        payload = encode(state)
    except TypeError as err:  # e.g. a callback's state_dict holding a lock or a file
        raise UnsavableStateError(f"cannot write the checkpoint of step {step} in {run_dir}: "
                                  f"{err}") from None
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(root)
    final = root / f"step_{step:012d}"
    tmp = _fresh_name(root, _TMP_PREFIX + final.name)
    # Not mkdtemp: its 0700 mode would outlive the rename; mkdir keeps the umask's mode.
    tmp.mkdir()
    try:
        with open(tmp / STATE_FILE, "wb") as fh:
            torch.save(payload, fh)
            fh.flush()
            os.fsync(fh.fileno())
        # The manifest is written last: a folder without one was never finished.
        manifest = json.dumps(_manifest(tmp, step), indent=2).encode()
        with open(tmp / MANIFEST_FILE, "wb") as fh:
            fh.write(manifest)
            fh.flush()
            os.fsync(fh.fileno())
        _fsync_dir(tmp)
        if final.exists():
            # Directories cannot be swapped atomically; a kill between these two renames
            # loses only this step's older copy, never an earlier step.
            _discard(final)
        os.replace(tmp, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if keep is not None:
        _prune(root, keep, final)
    return final


def load_checkpoint(
    path: Path, map_location: str | torch.device = "cpu"
) -> tuple[dict, dict[str, Any]]:
    """Verify a checkpoint, then return ``(state, manifest)``.

    ``path`` is the step folder or the ``state.pt`` inside it.
    """
    folder = resolve_checkpoint(path)
    manifest = verify_checkpoint(folder)
    state_path = folder / STATE_FILE
    try:
        payload = torch.load(state_path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL ([\w.]+)", str(err))
        culprit = f" (it asks for {found[1]})" if found else ""
        raise CheckpointError(
            f"{state_path}: refused to load{culprit}: only tensors and plain Python data are "
            "loaded, since anything else could run code") from err
    except Exception as err:
        raise CheckpointError(f"{state_path}: cannot be read ({err})") from err
    try:
        state = decode(payload)
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{state_path}: unexpected contents ({err})") from err
    return stack_saved_nets(state), manifest


def verify_checkpoint(path: Path) -> dict[str, Any]:
    """Check the manifest's sizes and checksums against the files; return the manifest."""
    folder = resolve_checkpoint(path)
    manifest_path = folder / MANIFEST_FILE
    try:
        manifest = json.loads(manifest_path.read_bytes())
    except FileNotFoundError:
        raise CheckpointError(f"{manifest_path}: missing, so {folder} is incomplete") from None
    except (ValueError, OSError) as err:
        raise CheckpointError(f"{manifest_path}: damaged, not readable JSON ({err})") from None
    try:
        version = manifest["format_version"]
        files = manifest["files"]
        if not isinstance(version, int) or not isinstance(files, dict) or STATE_FILE not in files:
            raise TypeError
        expected = {name: (int(e["size"]), str(e["sha256"])) for name, e in files.items()}
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"{manifest_path}: damaged, not an interplay manifest") from None
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"{manifest_path}: format {version} is newer than this interplay reads "
            f"({FORMAT_VERSION}); upgrade interplay")
    for name, (size, sha256) in expected.items():
        file = folder / name
        if Path(name).name != name or name in ("", ".", ".."):
            raise CheckpointError(f"{manifest_path}: names {name!r}, outside the checkpoint")
        if not file.is_file():
            raise CheckpointError(f"{file}: missing from the checkpoint")
        actual = file.stat().st_size
        if actual != size:
            raise CheckpointError(f"{file}: {actual} bytes but the manifest says {size}; "
                                  "the file is truncated or damaged")
        if _sha256(file) != sha256:
            raise CheckpointError(f"{file}: sha256 does not match the manifest; the file is damaged")
    return manifest


def resolve_checkpoint(path: Path) -> Path:
    """Return the step folder for a ``--checkpoint`` given as the folder or a file inside it."""
    path = Path(path)
    if path.is_file() and path.name in (STATE_FILE, MANIFEST_FILE):
        return path.parent
    if path.is_dir():
        if not (path / MANIFEST_FILE).exists() and (path / "checkpoints").is_dir():
            raise CheckpointError(
                f"{path}: is a run folder, not a checkpoint; pass one of its "
                "checkpoints/step_* folders")
        return path
    if path.exists():
        raise CheckpointError(
            f"{path}: not a checkpoint; pass a checkpoints/step_* folder or its {STATE_FILE}")
    raise CheckpointError(f"{path}: no such checkpoint")


def list_checkpoints(run_dir: Path) -> list[Path]:
    """The run's checkpoint folders, oldest step first (damaged ones included)."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = []
    for entry in root.iterdir():
        match = _STEP_DIR.fullmatch(entry.name)
        if match and entry.is_dir():
            found.append((int(match[1]), entry))
    return [p for _, p in sorted(found)]


def checkpoint_steps(run_dir: Path) -> list[int]:
    """The steps of the run's checkpoints, oldest first (damaged ones included)."""
    return [int(p.name.removeprefix("step_")) for p in list_checkpoints(run_dir)]


def latest_valid(run_dir: Path, upto: int | None = None) -> Path | None:
    """The newest checkpoint that passes verification (of those at env step ``upto`` or
    before, when given), warning about each one skipped."""
    for path in reversed(list_checkpoints(run_dir)):
        if upto is not None and int(path.name.removeprefix("step_")) > upto:
            continue
        try:
            verify_checkpoint(path)
        except CheckpointError as err:
            warnings.warn(f"skipping damaged checkpoint {path}: {err}", stacklevel=2)
            continue
        return path
    return None


def _manifest(folder: Path, step: int) -> dict[str, Any]:
    try:
        ours = importlib.metadata.version("interplay")
    except importlib.metadata.PackageNotFoundError:
        ours = "unknown"
    files = sorted(p for p in folder.iterdir() if p.name != MANIFEST_FILE)
    return {
        "format": "interplay-checkpoint",
        "format_version": FORMAT_VERSION,
        "step": step,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "versions": {
            "interplay": ours, "torch": torch.__version__, "numpy": np.__version__,
            "python": platform.python_version(),
        },
        "files": {p.name: {"size": p.stat().st_size, "sha256": _sha256(p)} for p in files},
    }


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _fsync_dir(path: Path) -> None:
    if os.name == "nt":  # Windows cannot open a folder to fsync it
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _discard(folder: Path) -> None:
    # Renamed away first so that a kill mid-delete leaves no half folder under a step name.
    aside = _fresh_name(folder.parent, _OLD_PREFIX + folder.name)
    os.replace(folder, aside)
    shutil.rmtree(aside, ignore_errors=True)


def _fresh_name(parent: Path, prefix: str) -> Path:
    return parent / f"{prefix}-{os.getpid()}-{secrets.token_hex(4)}"


def _remove_leftovers(root: Path) -> None:
    # Left by a save that was killed; one process writes a run's checkpoints at a time.
    for entry in root.iterdir():
        if entry.name.startswith((_TMP_PREFIX, _OLD_PREFIX)) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)


def _prune(root: Path, keep: int, just_written: Path) -> None:
    """Keep ``just_written`` and the newest ``keep - 1`` others that verify; remove the rest.

    Only verified checkpoints count toward ``keep``: a damaged one is left where it is (so
    nothing is lost that could still be looked at) and never pushes a good one out. Once
    enough good ones are found, everything older goes, damaged or not.
    """
    good = 1  # the one just written
    for path in reversed(list_checkpoints(root.parent)):
        if path == just_written:
            continue
        if good >= keep:
            _discard(path)
            continue
        try:
            verify_checkpoint(path)
        except CheckpointError:
            continue
        good += 1

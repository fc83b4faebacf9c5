"""A run folder is written by one process at a time, and a new run never mixes with an old one.

``train`` and ``resume`` hold ``.interplay.lock`` in the folder (an OS file lock, so a process
that dies releases it); the holder's pid and host are written into it for the error another
process gets. ``train`` refuses a folder that already holds a run unless told to overwrite it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from interplay.errors import UserError

LOCK_FILE = ".interplay.lock"
# Everything train, eval and the loggers write into a run folder.
RUN_FILES = ("config.yaml", "metrics.jsonl", "checkpoints", "tensorboard", "curve.png",
             "eval.json", "wandb", "league", "league.jsonl", "ratings.png")
# Every name written into a run folder: the run's files, the lock, a search's.
WRITTEN = (*RUN_FILES, LOCK_FILE, "hpo.jsonl", "hpo_state.json", "lineage.png", "members",
           "best")


LEAGUE_FOLDER = "league"
"""Where a run keeps its league snapshots: ``RUN_DIR/league/snapshot_<env steps>.pt``."""


def is_snapshot(path: Path) -> bool:
    """Whether ``path`` is a league snapshot file."""
    return (path.suffix == ".pt" and path.parent.name == LEAGUE_FOLDER
            and path.name.startswith("snapshot_"))


def source_run_dir(source: Path) -> Path:
    """The run folder of ``source``: itself, or the run holding that checkpoint folder or
    league snapshot file."""
    if (source.is_file() and is_snapshot(source)) or (
            not (source / "config.yaml").is_file() and (source / "state.pt").is_file()):
        return source.parent.parent
    return source



class RunFolderError(UserError):
    """A run folder is in use by another process, or holds a run that a new one would mix with."""


@contextmanager
def hold(run_dir: Path, create: bool = True, made: bool = False) -> Iterator[None]:
    """Hold ``run_dir`` for the body's duration; another process holding it is an error.

    A folder made here, or by the caller just before (``made``: a new run's own folder, made
    to claim its name), is removed again when the body leaves nothing in it."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunFolderError(f"{run_dir} is a file, not a run folder")
    refuse_links(run_dir)
    made = made or (create and not run_dir.is_dir())
    if made:
        run_dir.mkdir(parents=True, exist_ok=True)
    elif not run_dir.is_dir():
        raise RunFolderError(f"{run_dir}: no such run folder")
    path = run_dir / LOCK_FILE
    lock = FileLock(path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise RunFolderError(
            f"{run_dir} is in use by another interplay process ({_holder(path)}); wait for it "
            "to finish or stop it, or use another folder") from None
    try:
        path.write_text(f"{os.getpid()} {socket.gethostname()}\n")
        yield
    finally:
        if made and [p.name for p in run_dir.iterdir()] == [LOCK_FILE]:
            # A run that failed before writing anything leaves no folder behind. The file
            # goes while still locked, so no other process can be holding it.
            path.unlink()
            with contextlib.suppress(OSError):  # one that arrived since made its own
                run_dir.rmdir()
        lock.release()


def refuse_links(run_dir: Path) -> None:
    """Refuse a run folder in which something interplay writes is a symbolic link: a name of
    :data:`WRITTEN`, a temporary file beside one, or anything inside such a folder. A write
    through a link lands wherever it points, out of the folder; none is ever followed."""
    if not run_dir.is_dir():
        return
    for path in _written(run_dir):
        if path.is_symlink():
            raise RunFolderError(
                f"{path} is a symbolic link (to {os.readlink(path)}); interplay writes there and "
                "never through a link, which could lead out of the run folder. Replace the link "
                "with the file or folder itself, or remove it")


def _written(run_dir: Path) -> Iterator[Path]:
    with os.scandir(run_dir) as entries:
        for entry in entries:
            name = entry.name
            if not (name.startswith(WRITTEN) or name[1:].startswith(WRITTEN)):
                continue  # the user's own file: never written
            yield Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                for root, dirs, files in os.walk(entry.path):  # links are listed, not entered
                    yield from (Path(root) / n for n in (*dirs, *files))


def _holder(path: Path) -> str:
    try:
        pid, host = path.read_text().split()
    except (OSError, ValueError):  # the holder has not written it yet
        return "pid unknown"
    return f"pid {pid}" if host == socket.gethostname() else f"pid {pid} on host {host}"


def start_afresh(run_dir: Path, overwrite: bool = False, files: Sequence[str] = RUN_FILES,
                 resume_with: str = "interplay resume") -> None:
    """Refuse a folder that holds a run (one of ``files``), or with ``overwrite`` delete that
    run's files first; ``resume_with`` is the command that continues such a run.

    Other files in the folder are left alone, so an empty folder, or one holding only the
    user's own files, is fine.
    """
    found = [name for name in files if (run_dir / name).exists()]
    if not found:
        return
    if not overwrite:
        raise RunFolderError(
            f"{run_dir} already holds a run ({', '.join(found)}); continue it with "
            f"`{resume_with} {run_dir}`, write into a new folder, or delete that run and "
            "start again with --overwrite (overwrite=True from Python)")
    for name in found:
        path = run_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()

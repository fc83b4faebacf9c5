"""The failures that are the user's to fix; the CLI prints them without a traceback."""

from interplay.checkpoint import CheckpointError
from interplay.config import ConfigError
from interplay.envs.adapters import EnvContractError
from interplay.envs.async_vec import WorkerError
from interplay.envs.copies import EnvCrashError
from interplay.envs.registry import EnvSpecError
from interplay.envs.snapshot import SnapshotError
from interplay.spaces import SpaceError

USER_ERRORS: tuple[type[BaseException], ...] = (
    ConfigError, CheckpointError, SnapshotError, EnvSpecError, EnvContractError, SpaceError, FileNotFoundError, EnvCrashError, WorkerError,
    FloatingPointError,
)

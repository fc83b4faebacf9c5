"""The failures that are the user's to fix; the CLI prints them without a traceback.

Every such error derives from :class:`UserError`, wherever it is raised; the layers below
the CLI import this module, never the other way round.
"""

import errno
import os


class UserError(Exception):
    """Something the user can fix (a config key, an env, a file), already phrased for them."""


class ConfigError(UserError, ValueError):
    """A config problem, already phrased for the user."""


class NonFiniteError(UserError, FloatingPointError):
    """NaN or inf where a number was expected, with where it came from."""


class ScriptedPolicyError(UserError, ValueError):
    """A user's scripted policy raised, or returned an action outside its action space."""


class WriteError(UserError):
    """A file could not be written (disk full, quota, read-only disk, permissions)."""

    @classmethod
    def of(cls, path: str | os.PathLike, err: OSError, consequence: str = "") -> "WriteError":
        """The error for ``err`` raised while writing ``path``, naming both."""
        code = errno.errorcode.get(err.errno, str(err.errno)) if err.errno else ""
        reason = f"{err.strerror} [{code}]" if err.strerror else str(err) or type(err).__name__
        return cls(f"cannot write {path}: {reason}" + (f"; {consequence}" if consequence else ""))


USER_ERRORS: tuple[type[BaseException], ...] = (UserError, FileNotFoundError, FloatingPointError)

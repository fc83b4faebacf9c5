"""The failures that are the user's to fix; the CLI prints them without a traceback.

Every such error derives from :class:`UserError`, wherever it is raised; the layers below
the CLI import this module, never the other way round.
"""


class UserError(Exception):
    """Something the user can fix (a config key, an env, a file), already phrased for them."""


class ConfigError(UserError, ValueError):
    """A config problem, already phrased for the user."""


class NonFiniteError(UserError, FloatingPointError):
    """NaN or inf where a number was expected, with where it came from."""


USER_ERRORS: tuple[type[BaseException], ...] = (UserError, FileNotFoundError, FloatingPointError)

"""The experiment config: typed sections, YAML loading and merging, overrides, validation."""

from interplay.config.describe import describe, to_yaml
from interplay.config.loading import apply_override, load, merge, read_yaml
from interplay.config.schema import Config, Section
from interplay.config.validation import validate, validate_section
from interplay.errors import ConfigError

__all__ = [
    "Config", "ConfigError", "Section", "apply_override", "describe", "load", "merge",
    "read_yaml", "to_yaml", "validate", "validate_section",
]

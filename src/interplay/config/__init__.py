"""The experiment config: typed sections, YAML loading and merging, overrides, validation."""

from interplay.config.schema import (
    Config,
    ConfigError,
    Section,
    apply_override,
    describe,
    load,
    merge,
    read_yaml,
    to_yaml,
    validate,
    validate_section,
)

__all__ = [
    "Config", "ConfigError", "Section", "apply_override", "describe", "load", "merge",
    "read_yaml", "to_yaml", "validate", "validate_section",
]

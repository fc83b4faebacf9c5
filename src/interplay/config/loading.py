"""Configs from YAML files and ``-s dotted.key=value`` overrides: files merge in order, the
overrides go last, and the result is validated before any work starts.

YAML is read with a safe loader that refuses tags, bounds aliases and what they expand to, and
names the file and line of what it refuses."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from interplay.config.schema import Config
from interplay.config.validation import validate
from interplay.errors import ConfigError

MAX_ALIASES = 100
"""Aliases (``*name``) one YAML document may use; configs need a handful."""
MAX_NODES = 100_000
"""Values one YAML document may expand to, counting each alias as a copy of what it names."""


class _Refused(yaml.YAMLError):
    """A YAML document the loader will not build, with where in it."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem, self.mark = problem, mark


class _Loader(yaml.SafeLoader):
    """YAML's safe loader, reading ``3e-4`` and ``2e6`` as numbers (YAML 1.2) as people expect.

    It also refuses what a config never needs and a hostile file uses: aliases beyond
    ``MAX_ALIASES`` or expanding past ``MAX_NODES`` values ("billion laughs"), an alias inside
    what it names (a recursive value), and a key given twice in one mapping (the last would
    silently win).
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._sizes: dict[int, int] = {}  # id(node) -> values it expands to
        self._path: list[str] = []

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _Refused(f"more than {MAX_ALIASES} aliases (*name); a config needs far "
                               "fewer, and many can expand to more than memory holds", event.start_mark)
            node = super().compose_node(parent, index)
            if id(node) not in self._sizes:
                raise _Refused(f"alias *{event.anchor} is inside the value it names (a value "
                               "that contains itself)", event.start_mark)
            return node
        node = super().compose_node(parent, index)
        if isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self._sizes[id(v)] for v in node.value)
        elif isinstance(node, yaml.MappingNode):
            size = 1 + sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
        else:
            size = 1
        if size > MAX_NODES:
            raise _Refused(f"this value expands to more than {MAX_NODES:,} values (aliases "
                           "repeat what they name); refusing to build it", getattr(node, "start_mark", None))
        self._sizes[id(node)] = size
        return node

    def compose_mapping_node(self, anchor: Any) -> Any:
        start = self.get_event()
        tag = start.tag
        if tag is None or tag == "!":
            tag = self.resolve(yaml.MappingNode, None, start.implicit)
        node = yaml.MappingNode(tag, [], start.start_mark, None, flow_style=start.flow_style)
        if anchor is not None:
            self.anchors[anchor] = node
        seen: dict[Any, Any] = {}
        while not self.check_event(yaml.MappingEndEvent):
            key_node = self.compose_node(node, None)
            key = self._key_of(key_node)
            if key is not None:
                if key in seen:
                    dotted = ".".join([*self._path, str(key_node.value)])
                    raise _Refused(f"duplicate key {dotted!r} (first at line "
                                   f"{seen[key].line + 1}); the second would silently replace "
                                   "the first", key_node.start_mark)
                seen[key] = key_node.start_mark
            self._path.append(str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?")
            value_node = self.compose_node(node, key_node)
            self._path.pop()
            node.value.append((key_node, value_node))
        node.end_mark = self.get_event().end_mark
        return node

    def _key_of(self, node: Any) -> Any:
        """A scalar key as the mapping will hold it (``1`` and ``0x1`` are one key); else None."""
        if not isinstance(node, yaml.ScalarNode) or node.tag == "tag:yaml.org,2002:merge":
            return None
        try:
            key = self.construct_object(node)
            hash(key)
        except Exception:  # noqa: BLE001 - construction reports its own error later
            return (node.tag, node.value)
        return key


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d[\d_]*)?(?:\.\d*)?[eE][-+]?\d+$"),
    list("-+0123456789."),
)


def _safe_load(text: str, where: str) -> Any:
    try:
        return yaml.load(io.StringIO(text), Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except _Refused as err:
        raise ConfigError(f"{where}, line {err.mark.line + 1}: {err.problem}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{where}: not valid YAML (or uses a tag that is not allowed): {err}"
                          + _tab_hint(text, err)) from None


def _tab_hint(text: str, err: yaml.YAMLError) -> str:
    """Why a line with a tab fails: YAML indents with spaces only, which its error never says."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    lines = text.splitlines()
    suspects = [mark.line] if mark is not None and mark.line < len(lines) else []
    suspects += [i for i, line in enumerate(lines) if "\t" in line[:len(line) - len(line.lstrip())]]
    for i in suspects:
        if i < len(lines) and "\t" in lines[i]:
            return (f"\n  line {i + 1} holds a tab: YAML indents with spaces only (and a tab "
                    "cannot start a value); replace the tabs with spaces")
    return ""


def read_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        inside = " (it holds a config.yaml: give that file)" if (p / "config.yaml").is_file() else ""
        raise ConfigError(f"config file {str(p)!r} is a folder, not a YAML file{inside}")
    if p.is_symlink() and not p.exists():
        raise ConfigError(f"config file {str(p)!r} is a link to {str(p.readlink())!r}, which "
                          "does not exist")
    if not p.exists():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    try:
        raw = p.read_bytes()
    except OSError as err:
        raise ConfigError(f"config file {str(p)!r} cannot be read: "
                          f"{err.strerror or type(err).__name__}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise ConfigError(f"{p}, line {line}: not UTF-8 text (byte {raw[err.start]:#04x} at "
                          f"offset {err.start}); save the file as UTF-8") from None
    data = _safe_load(text, str(p))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of sections, got {type(data).__name__}")
    return data


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``extra`` into a copy of ``base``; mappings merge, everything else replaces."""
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {text!r}: expected dotted.key=value, e.g. train.steps=20000")
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"override {text!r}: the value is not UTF-8 text") from None
    value = _safe_load(raw, f"override {text!r}") if raw.strip() else ""
    return key.strip().split("."), value


def apply_override(data: dict[str, Any], text: str) -> dict[str, Any]:
    path, value = parse_override(text)
    nested: Any = value
    for part in reversed(path):
        nested = {part: nested}
    return merge(data, nested)


def load(files: Sequence[str | Path] = (), overrides: Sequence[str] = (),
         base: dict[str, Any] | None = None) -> Config:
    """Read, merge and validate a config: ``base``, then each file in order, then overrides."""
    return validate(read(files, overrides, base))


def read(files: Sequence[str | Path] = (), overrides: Sequence[str] = (),
         base: dict[str, Any] | None = None) -> dict[str, Any]:
    """What :func:`load` validates: ``base``, each file in order, then overrides, merged."""
    data: dict[str, Any] = dict(base or {})
    for f in files:
        data = merge(data, read_yaml(f))
    for o in overrides:
        data = apply_override(data, o)
    return data

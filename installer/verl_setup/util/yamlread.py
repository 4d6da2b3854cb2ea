"""Read YAML keeping line numbers and refusing duplicate keys, so errors can point at a line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class LinedDict(dict[str, Any]):
    """A mapping that remembers the line of itself and of each key (1-based)."""

    line: int = 0
    key_lines: dict[str, int]


class YamlError(Exception):
    """The file is not YAML we can use; the message names file and line."""


# libyaml's parser when present (5x faster on the matrix); marks and line numbers work the same.
_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):  # type: ignore[valid-type,misc]  # chosen at run time
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LinedDict:
    loader.flatten_mapping(node)
    result = LinedDict()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            key = str(key)
        if key in result:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = key_node.start_mark.line + 1
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_yaml(path: Path) -> tuple[Any, bytes]:
    """Return (data, raw bytes) of a YAML file; YamlError on unreadable or malformed input."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise YamlError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        return yaml.load(raw, Loader=_Loader), raw  # noqa: S506  # _Loader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise YamlError(f"{where}: malformed YAML: {exc.problem or exc}") from exc
    except yaml.YAMLError as exc:
        raise YamlError(f"{path}: malformed YAML: {exc}") from exc

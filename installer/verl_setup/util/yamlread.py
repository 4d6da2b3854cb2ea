"""Read YAML keeping line numbers and refusing duplicate keys, so errors can point at a line.

Matrix files come from users too (`--matrix`), so the reader is bounded: a size cap, a regular
file, no aliases (an alias bomb expands exponentially once anything stringifies it; our files
use none), a nesting cap, and numbers only as long as Python will convert them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from verl_setup.util.bounded import MAX_DEPTH, BoundError, one_line, read_capped
from verl_setup.util.databuild import LinedDict

MAX_BYTES = 4 * 2**20  # matrices/verl.yaml is ~60 KB


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
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {one_line(key)!r}", key_node.start_mark
            )
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = key_node.start_mark.line + 1
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _check_nodes(root: yaml.Node, where: str) -> None:
    """Refuse aliases (a node reached twice) and nesting beyond MAX_DEPTH, without recursion."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, level = stack.pop()
        if id(node) in seen:
            raise YamlError(f"{where}:{node.start_mark.line + 1}: YAML aliases are not allowed here")
        seen.add(id(node))
        if level > MAX_DEPTH:
            raise YamlError(f"{where}:{node.start_mark.line + 1}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.MappingNode):
            stack.extend((part, level + 1) for pair in node.value for part in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, level + 1) for item in node.value)


def read_yaml(path: Path) -> tuple[Any, bytes]:
    """Return (data, raw bytes) of a YAML file; YamlError on unreadable or malformed input."""
    where = one_line(str(path))
    try:
        raw = read_capped(path, MAX_BYTES, "YAML file")
    except BoundError as exc:
        raise YamlError(str(exc)) from exc
    loader = _Loader(raw)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, raw
        _check_nodes(node, where)
        return loader.construct_document(node), raw
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        at = f"{where}:{mark.line + 1}" if mark else where
        raise YamlError(f"{at}: malformed YAML: {one_line(str(exc.problem or exc))}") from exc
    except yaml.YAMLError as exc:
        raise YamlError(f"{where}: malformed YAML: {one_line(str(exc))}") from exc
    except (ValueError, OverflowError, RecursionError) as exc:
        # A 5000-digit integer exceeds int()'s digit limit; a huge float overflows.
        raise YamlError(f"{where}: unusable value: {one_line(str(exc))}") from exc
    finally:
        loader.dispose()

"""One typed builder from data: a frozen dataclass from YAML or JSON, every problem reported with
file, line and key, and a suggestion for an unknown key or value (matrix rows, host files)."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, TypeVar

from verl_setup.util.vocab import suggest

T = TypeVar("T")


# Here, not in yamlread.py: a host file is JSON, and reading one should not import a YAML parser.
class LinedDict(dict[str, Any]):
    """A mapping that remembers the line of itself and of each key (1-based)."""

    line: int = 0
    key_lines: dict[str, int]


class Builder:
    """Builds dataclasses from YAML data, collecting every problem with file, line and key."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[str] = []

    def problem(self, line: int, where: str, message: str) -> None:
        """Record one problem (line 0: the data has no lines, as JSON)."""
        at = f"{self.file}:{line}" if line else self.file
        self.problems.append(f"{at}: {where}: {message}")

    def build(self, cls: type[T], data: Any, where: str, line: int) -> T | None:
        """Build `cls` from a mapping, or record why not and return None."""
        if not isinstance(data, dict):
            self.problem(line, where, f"expected a mapping, got {_kind(data)}")
            return None
        lines = data.key_lines if isinstance(data, LinedDict) else {}
        line = data.line if isinstance(data, LinedDict) else line
        fields = {f.name: f for f in dataclasses.fields(cls) if f.name != "line"}  # type: ignore[arg-type]
        hints = _hints(cls)
        ok = True
        for key in data:
            if key not in fields:
                hint = suggest(key, fields)
                self.problem(lines.get(key, line), where, f"unknown key {key!r}{hint}")
                ok = False
        kwargs: dict[str, Any] = {}
        for name, f in fields.items():
            key_where = f"{where}.{name}" if where else name
            if name not in data:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    self.problem(line, where or "top level", f"missing key {name!r}")
                    ok = False
                continue
            value = self.convert(hints[name], data[name], key_where, lines.get(name, line))
            if value is _BAD:
                ok = False
            else:
                kwargs[name] = value
        if "line" in {f.name for f in dataclasses.fields(cls)}:  # type: ignore[arg-type]
            kwargs["line"] = line
        return cls(**kwargs) if ok else None

    def convert(self, hint: Any, value: Any, where: str, line: int) -> Any:  # noqa: PLR0911, PLR0912
        """Check one value against a type hint; return _BAD after recording a problem."""
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            if value is None and type(None) in args:
                return None
            (inner,) = [a for a in args if a is not type(None)]
            return self.convert(inner, value, where, line)
        if origin is Literal:
            if value in args:
                return value
            hint_text = suggest(str(value), [str(a) for a in args])
            self.problem(line, where, f"{value!r} is not one of {', '.join(map(str, args))}{hint_text}")
            return _BAD
        if origin is tuple:
            if not isinstance(value, list):
                self.problem(line, where, f"expected a list, got {_kind(value)}")
                return _BAD
            items = [
                self.convert(args[0], v, f"{where}[{_label(v, i)}]", getattr(v, "line", line))
                for i, v in enumerate(value)
            ]
            return _BAD if _BAD in items else tuple(items)
        if origin is dict:
            if not isinstance(value, dict):
                self.problem(line, where, f"expected a mapping, got {_kind(value)}")
                return _BAD
            lines = value.key_lines if isinstance(value, LinedDict) else {}
            mapping = {
                str(k): self.convert(args[1], v, f"{where}.{k}", lines.get(k, line)) for k, v in value.items()
            }
            return _BAD if any(v is _BAD for v in mapping.values()) else mapping
        if dataclasses.is_dataclass(hint):
            built = self.build(hint, value, where, line)  # type: ignore[arg-type]
            return _BAD if built is None else built
        if hint is str:
            if isinstance(value, str):
                return value
            quoted = " (quote it: YAML reads 3.10 as the number 3.1)" if isinstance(value, float) else ""
            self.problem(line, where, f"expected a string, got {_kind(value)} {value!r}{quoted}")
            return _BAD
        if hint is bool and isinstance(value, bool):
            return value
        if hint is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        self.problem(line, where, f"expected {getattr(hint, '__name__', hint)}, got {_kind(value)}")
        return _BAD


_BAD: Any = object()


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    """Resolved field types of a dataclass, once (resolving them is the slow part of a load)."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _kind(value: Any) -> str:
    return {dict: "a mapping", LinedDict: "a mapping", list: "a list", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _label(item: Any, index: int) -> str:
    """Name list items by their id where they have one: rows[verl0.4-vllm0.8.5], not rows[14]."""
    if isinstance(item, dict) and isinstance(item.get("id"), str):
        return str(item["id"])
    return str(index)

"""Input bounds: read a file only if it is a regular one of bounded size, cap nesting, keep
messages to one line. Every file a user or a host hands us passes through here first."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

MAX_DEPTH = 64  # our host files nest 4 deep and matrix files 5; far beyond that is an attack
MAX_MESSAGE = 400  # characters of a value echoed in an error line
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


class BoundError(Exception):
    """The input is not a regular file, too large, too deep, or unreadable; one line."""


def read_capped(path: Path, limit: int, what: str) -> bytes:
    """The bytes of `path` if it is a regular file of at most `limit` bytes.

    Opened non-blocking and checked with fstat before reading, so a FIFO, a device such as
    /dev/zero or a directory is refused at once instead of hanging or filling memory.
    """
    shown = one_line(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise BoundError(f"cannot read {what} {shown}: {_reason(exc)}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise BoundError(f"{what} {shown} is not a regular file")
        if info.st_size > limit:
            raise BoundError(f"{what} {shown} is {info.st_size} bytes; the limit is {limit}")
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1
            data = handle.read(limit + 1)  # a file that grows while we read is still capped
    except OSError as exc:
        raise BoundError(f"cannot read {what} {shown}: {_reason(exc)}") from exc
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > limit:
        raise BoundError(f"{what} {shown} is over the limit of {limit} bytes")
    return data


def loads_json(data: bytes | str, what: str, limit: int = MAX_DEPTH) -> object:
    """JSON nested at most `limit` deep; BoundError past it, ValueError when it is not JSON.

    The depth is measured on the text before parsing: json's decoder recurses per level, so a
    100 000-deep array would end in RecursionError (or worse) before any check on the result."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data  # UnicodeDecodeError is a ValueError
    if _text_depth(text) > limit:
        raise BoundError(f"{one_line(what)} nests deeper than {limit} levels")
    return json.loads(text)


def _text_depth(text: str) -> int:
    """The deepest [ or { of JSON text, strings skipped."""
    deepest = level = 0
    for ch in _BRACKETS.findall(_STRINGS.sub("", text)):
        level += 1 if ch in "[{" else -1
        deepest = max(deepest, level)
    return deepest


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return one_line(str(exc)) or type(exc).__name__


def one_line(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` with line breaks and other control characters escaped, cut to `limit` characters."""
    out = "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in text[: limit + 1])
    return out if len(out) <= limit else out[:limit] + "..."


def depth(value: object, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of parsed JSON/YAML data, walked without recursion; stops past `limit`."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > limit:
            break
        stack.extend((child, level + 1) for child in _children(item))
    return deepest


def _children(item: object) -> Iterator[object]:
    if isinstance(item, dict):
        yield from item.values()
    elif isinstance(item, (list, tuple)):
        yield from item

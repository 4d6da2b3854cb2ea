"""Read one log file once, streaming, in fixed-size chunks: memory stays bounded whatever the size.

A few literal anchors are searched in each chunk with bytes.find (C, memory speed); only the lines
that hold one are matched against the combined trigger pattern (a named group per rule) and
decoded, with a few lines of context either side, and each rule keeps at most
`PER_RULE` of them, so a 2 GB log full of one warning costs a pass over its bytes and no more.
"""

from __future__ import annotations

import io
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from verl_setup.util.bounded import one_line

CHUNK = 1 << 20  # bytes per read
MAX_LINE = 64 << 10  # a longer "line" (a progress bar without newlines) is cut here
PER_RULE = 20  # lines kept per rule per file
BEFORE = 40  # context lines kept before a hit (tracebacks put the frames before the error)
AFTER = 12  # and after (Ray's ActorDiedError names the pid on the next lines)
# The combined trigger pattern and the anchors that find its candidate lines.
Triggers = tuple[re.Pattern[bytes], tuple[bytes, ...]]
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True, kw_only=True)
class Hit:
    """One line a rule's trigger matched: where it is, its text, and its neighbours."""

    rule: str
    path: str
    number: int  # 1-based line number in the file
    text: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


@dataclass(kw_only=True)
class FileScan:
    """What reading one file gave: its hits per rule, how much was read, or why it could not be."""

    path: str
    size: int = 0
    lines: int = 0
    hits: dict[str, list[Hit]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # all hits, kept or not
    error: str | None = None


def clean(raw: bytes) -> str:
    """A log line as text: undecodable bytes replaced, terminal colour codes dropped, no newline."""
    return _ANSI.sub("", raw.decode("utf-8", "replace")).rstrip("\r\n")


def scan_file(path: Path, triggers: Triggers) -> FileScan:
    """Every trigger hit in `path` (up to PER_RULE per rule), streaming; a FIFO or device is refused."""
    result = FileScan(path=str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:
        result.error = f"cannot read {one_line(str(path))}: {getattr(exc, 'strerror', None) or exc}"
        return result
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            result.error = f"{one_line(str(path))} is not a regular file"
            return result
        result.size = info.st_size
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1
            _stream(handle, triggers, result)
    except OSError as exc:
        result.error = f"cannot read {one_line(str(path))}: {exc.strerror or exc}"
    finally:
        if fd >= 0:
            os.close(fd)
    return result


def _stream(handle: object, triggers: Triggers, result: FileScan) -> None:
    read = handle.read  # type: ignore[attr-defined]
    carry = b""  # an unfinished last line
    tail = b""  # the end of the previous block, for context before a hit at a block's start
    line_base = 0  # lines before this block
    while True:
        chunk = read(CHUNK)
        block = carry + chunk
        if not chunk:
            if block:
                _block(block + b"\n", tail, line_base, triggers, result)
                line_base += 1
            break
        end = block.rfind(b"\n") + 1
        if end == 0 and len(block) > MAX_LINE:  # no newline for a long time: cut the line here
            block += b"\n"
            end = len(block)
        if end == 0:
            carry = block
            continue
        body, carry = block[:end], block[end:]
        line_base += _block(body, tail, line_base, triggers, result)
        tail = body[-BEFORE * 256 :]
    result.lines = line_base


def _candidates(body: bytes, anchors: tuple[bytes, ...]) -> list[int]:
    """The start of every line holding an anchor, in order (bytes.find runs in C, at memory speed)."""
    starts: set[int] = set()
    for anchor in anchors:
        at = body.find(anchor)
        while at >= 0:
            line = body.rfind(b"\n", 0, at) + 1
            starts.add(line)
            stop = body.find(b"\n", at)
            if stop < 0:
                break
            at = body.find(anchor, stop + 1)
    return sorted(starts)


def _block(body: bytes, tail: bytes, line_base: int, rules: Triggers, result: FileScan) -> int:
    """Record the hits of one block of whole lines; return its number of lines."""
    pattern, anchors = rules
    counted, number = 0, line_base
    for start in _candidates(body, anchors):
        stop = body.find(b"\n", start)
        line = body[start : min(stop, start + MAX_LINE)]
        m = pattern.search(line)
        if m is None:
            continue
        number += body.count(b"\n", counted, start)
        counted = start
        rule = m.lastgroup or "?"
        result.counts[rule] = result.counts.get(rule, 0) + 1
        kept = result.hits.setdefault(rule, [])
        if len(kept) < PER_RULE:
            kept.append(
                Hit(
                    rule=rule,
                    path=result.path,
                    number=number + 1,
                    text=clean(line),
                    before=_before(tail + body[:start] if start < BEFORE * 256 else body[:start]),
                    after=tuple(
                        clean(x) for x in body[stop + 1 : stop + 1 + AFTER * 512].split(b"\n")[:AFTER]
                    ),
                )
            )
    return number - line_base + body.count(b"\n", counted)


def _before(data: bytes) -> tuple[str, ...]:
    lines = data[-BEFORE * 512 :].split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return tuple(clean(x) for x in lines[-BEFORE:])


def scan_text(name: str, text: str, triggers: Triggers) -> FileScan:
    """The same scan over text a program printed (dmesg), named `name` in the evidence."""
    data = text.encode("utf-8", "replace")
    result = FileScan(path=name, size=len(data))
    _stream(io.BytesIO(data), triggers, result)
    return result

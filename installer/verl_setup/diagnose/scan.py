"""Read each log file once, streaming: memory stays bounded whatever the size.

The rules' literal anchors find candidate lines in ONE pass: grep (one extended pattern of the
literal anchors, 1.8 s of CPU per GiB) reads the files, up to BATCH per run, and prints only the
lines holding an anchor, with their line number and byte offset; without grep, each chunk is
searched with bytes.find per anchor (slower, same result). Only candidate lines are matched
against the combined trigger pattern (a named group per rule) and decoded, with a few lines of
context either side read back at their offset, and each rule keeps at most `PER_RULE` of them, so
a 2 GB log full of one warning costs a pass over its bytes and no more. A binary file (a
checkpoint beside the logs) is skipped, and a file larger than the bytes left to read is read from
its end, where a run fails.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from verl_setup.util import runner
from verl_setup.util.bounded import one_line

CHUNK = 1 << 20  # bytes per read
MAX_LINE = 64 << 10  # a longer "line" (a progress bar without newlines) is cut here
PER_RULE = 20  # lines kept per rule per file
BEFORE = 40  # context lines kept before a hit (tracebacks put the frames before the error)
AFTER = 12  # and after (Ray's ActorDiedError names the pid on the next lines)
SNIFF = 8 << 10  # bytes read at each end of a file to tell a binary from a log
GREP_MIN = 1 << 20  # smaller files are searched here: starting grep costs more than they take
BATCH = 32  # files per grep run: bounds the descriptors open at once and wc's output
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
    start: int = 0  # the first byte read (a file larger than the bytes left is read from its end)
    skipped: str | None = None  # why the file was not read though it could be (a binary)

    @property
    def read(self) -> int:
        """The bytes actually read."""
        return 0 if self.skipped or self.error else self.size - self.start


def clean(raw: bytes) -> str:
    """A log line as text: undecodable bytes replaced, terminal colour codes dropped, no newline."""
    return _ANSI.sub("", raw.decode("utf-8", "replace")).rstrip("\r\n")


def scan_file(path: Path, triggers: Triggers, limit: int | None = None) -> FileScan:
    """Every trigger hit in `path` (up to PER_RULE per rule), streaming, at most its last `limit`
    bytes; a FIFO or device is refused, a binary file skipped."""
    return scan_files([(path, limit)], triggers, workers=1)[0]


def scan_files(jobs: Sequence[tuple[Path, int | None]], triggers: Triggers, workers: int) -> list[FileScan]:
    """scan_file for each (path, limit), in order, `workers` at a time. The files grep reads whole
    go to it BATCH at a time (one grep and one wc per batch: starting two programs per file cost
    0.3 s of CPU per 130 files), the rest one by one; each task opens its own files, so no more
    than BATCH x workers are open at once."""
    grep = _grep()
    whole = [
        i for i, (path, limit) in enumerate(jobs) if grep and "\n" not in str(path) and _fits(path, limit)
    ]
    groups = max(1, min(workers, len(whole)), -(-len(whole) // BATCH))
    batched = set(whole)
    tasks = [whole[g::groups] for g in range(groups) if whole[g::groups]]
    tasks += [[i] for i in range(len(jobs)) if i not in batched]
    results: dict[int, FileScan] = {}

    def run(indices: list[int]) -> None:
        opened = [(i, *_open(*jobs[i])) for i in indices]
        live = [(fd, r) for _, fd, r in opened if fd is not None]
        try:
            _scan_open(grep, live, triggers)
        finally:
            for fd, _ in live:
                os.close(fd)
        results.update((i, r) for i, _, r in opened)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(run, tasks))
    return [results[i] for i in range(len(jobs))]


def _fits(path: Path, limit: int | None) -> bool:
    """Large enough for grep, read whole (not from an offset), named without a newline."""
    if "\n" in str(path):
        return False
    try:
        size = Path(path).stat().st_size
    except (OSError, ValueError):
        return False
    return size >= GREP_MIN and (limit is None or size <= limit)


def _open(path: Path, limit: int | None) -> tuple[int | None, FileScan]:
    """The file open, its size and first byte to read; no descriptor (and why) for a non-file, a
    binary or an error."""
    result = FileScan(path=str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:
        result.error = f"cannot read {one_line(str(path))}: {getattr(exc, 'strerror', None) or exc}"
        return None, result
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            result.error = f"{one_line(str(path))} is not a regular file"
        else:
            result.size = info.st_size
            if _binary(fd, info.st_size):
                result.skipped = f"{one_line(str(path))}: a binary file ({info.st_size} bytes), not read"
            elif limit is not None and info.st_size > limit:
                result.start = info.st_size - limit
    except OSError as exc:
        result.error = f"cannot read {one_line(str(path))}: {exc.strerror or exc}"
    if result.error or result.skipped:
        os.close(fd)
        return None, result
    return fd, result


def _scan_open(grep: str | None, items: list[tuple[int, FileScan]], triggers: Triggers) -> None:
    """grep over the open files (one, from its offset, or several whole), else each read here."""
    if len(items) > 1 and any(r.start for _, r in items):  # grown past the budget since: one by one
        for item in items:
            _scan_open(grep, [item], triggers)
        return
    big = bool(items) and all(r.size - r.start >= GREP_MIN for _, r in items)
    done = grep is not None and big and _grep_scan(grep, items, triggers)
    for fd, result in [] if done else items:
        try:
            os.lseek(fd, result.start, os.SEEK_SET)
            with os.fdopen(os.dup(fd), "rb", closefd=True) as handle:
                _stream(handle, triggers, result)
        except OSError as exc:
            result.error = f"cannot read {one_line(result.path)}: {exc.strerror or exc}"


def text_size(path: Path) -> int:
    """The bytes a scan of `path` would read whole: 0 for a binary, a non-file or an error."""
    fd, result = _open(path, None)
    if fd is not None:
        os.close(fd)
    return 0 if fd is None else result.size


def _binary(fd: int, size: int) -> bool:
    """NUL bytes among other bytes at the start (a checkpoint, a wheel, an image); a start of only
    NULs (a log truncated while open, copytruncate) is a log if its end has none."""
    head = os.pread(fd, SNIFF, 0)
    if b"\0" not in head:
        return False
    if head.strip(b"\0"):
        return True
    return b"\0" in os.pread(fd, SNIFF, max(0, size - SNIFF))


@functools.cache
def _grep() -> str | None:
    return shutil.which("grep")


def _grep_scan(grep: str, items: list[tuple[int, FileScan]], triggers: Triggers) -> bool:
    """The candidate lines from one grep over the files (one from its offset on stdin, or several
    whole by name), while `wc -l` counts their lines beside it. False if grep failed (then the
    caller reads the files itself)."""
    pattern, anchors = triggers
    # One extended pattern of the literal anchors: GNU grep 3.8 scans it about a third faster than
    # the same strings given to -F (both find the same lines).
    argv = [grep, "-a", "-n", "-b", "-E", "-e", "|".join(_ere(a.decode("ascii")) for a in anchors)]
    many = len(items) > 1
    # Kept apart until grep succeeds; several by name with -H -Z (the name, a NUL, N:OFFSET:text).
    keys = [os.fsencode(r.path) if many else b"" for _, r in items]
    empty = [(fd, FileScan(path=r.path, size=r.size, start=r.start)) for fd, r in items]
    found = dict(zip(keys, empty, strict=True))
    try:
        with contextlib.ExitStack() as stack:
            stdin = os.open(os.devnull, os.O_RDONLY) if many else items[0][0]
            if many:
                stack.callback(os.close, stdin)
                argv += ["-H", "-Z", "--", *(r.path for _, r in items)]
            proc = stack.enter_context(runner.piped(argv, stdin=stdin, env={"LC_ALL": "C"}))
            counter = _start_count([r.path for _, r in items], items[0][1].start, stack)
            out = proc.stdout
            assert out is not None  # noqa: S101  # a pipe was asked for
            whole = True  # the previous piece ended its line
            while piece := out.readline(MAX_LINE):
                name, _, rest = piece.partition(b"\0") if many else (b"", b"", piece)
                if whole and name in found:
                    _candidate(rest, found[name][0], pattern, found[name][1])
                whole = piece.endswith(b"\n")
            code = proc.wait()
            counts = _counted(counter, len(items))
    except runner.ProgramError:
        return False
    if code not in (0, 1):  # 1: no line matched
        return False
    counted_each: list[int | None] = list(counts) if counts else [None] * len(items)
    for key, (fd, result), counted in zip(keys, items, counted_each, strict=True):
        if counted is None:
            lines = _count_lines(fd, result.start, result.size)
        else:  # an unfinished last line is a line
            unfinished = result.size > result.start and os.pread(fd, 1, result.size - 1) != b"\n"
            lines = counted + unfinished
        hits = found[key][1]
        result.hits, result.counts, result.lines = hits.hits, hits.counts, lines
    return True


def _start_count(paths: list[str], start: int, stack: contextlib.ExitStack) -> subprocess.Popen[bytes] | None:
    """`wc -l` over one file from `start` (on stdin) or several whole (by name), at memchr speed on
    another core; None without wc."""
    wc = shutil.which("wc")
    if wc is None:
        return None
    one = len(paths) == 1
    fd = os.open(paths[0] if one else os.devnull, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    stack.callback(os.close, fd)
    os.lseek(fd, start if one else 0, os.SEEK_SET)
    argv = [wc, "-l"] + ([] if one else ["--", *paths])
    try:
        return stack.enter_context(runner.piped(argv, stdin=fd, env={"LC_ALL": "C"}))
    except runner.ProgramError:
        return None


_WC_LINE = re.compile(rb"\s*(\d+)(?: (.*))?")


def _counted(counter: subprocess.Popen[bytes] | None, files: int) -> list[int] | None:
    """wc's counts, one per file in order; None (count them here) without wc's answer."""
    if counter is None or counter.stdout is None:
        return None
    text = counter.stdout.read().split(b"\n")
    if counter.wait() != 0:
        return None
    rows = [m for line in text[:files] if (m := _WC_LINE.fullmatch(line))]
    return [int(m[1]) for m in rows] if len(rows) == files else None


def _ere(literal: str) -> str:
    """A literal as a POSIX extended regular expression."""
    return "".join("\\" + c if c in ".[]()*+?{}|^$\\" else c for c in literal)


def _count_lines(fd: int, start: int, size: int) -> int:
    count, at, last = 0, start, b"\n"
    while at < size:
        chunk = os.pread(fd, CHUNK, at)
        if not chunk:
            break
        count += chunk.count(b"\n")
        at += len(chunk)
        last = chunk[-1:]
    return count + (last != b"\n")


_GREP_LINE = re.compile(rb"(\d+):(\d+):")


def _candidate(piece: bytes, fd: int, pattern: re.Pattern[bytes], result: FileScan) -> None:
    """One line grep printed (`N:OFFSET:text`): a hit if the trigger pattern matches it."""
    head = _GREP_LINE.match(piece)
    if head is None:
        return
    whole = piece.endswith(b"\n")
    line = piece[head.end() :].rstrip(b"\n")
    m = pattern.search(line)
    if m is None:
        return
    rule = m.lastgroup or "?"
    result.counts[rule] = result.counts.get(rule, 0) + 1
    kept = result.hits.setdefault(rule, [])
    if len(kept) >= PER_RULE:
        return
    at = result.start + int(head[2])
    above = os.pread(fd, min(at - result.start, BEFORE * 512), max(result.start, at - BEFORE * 512))
    below = os.pread(fd, AFTER * 512, at + len(line) + 1) if whole else b""
    kept.append(
        Hit(
            rule=rule, path=result.path, number=int(head[1]), text=clean(line), before=_before(above),
            after=tuple(clean(x) for x in below.split(b"\n")[:AFTER]) if below else (),
        )
    )  # fmt: skip


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
            above = tail + body[:start] if start < BEFORE * 256 else body[:start]
            below = body[stop + 1 : stop + 1 + AFTER * 512].split(b"\n")[:AFTER]
            kept.append(
                Hit(rule=rule, path=result.path, number=number + 1, text=clean(line), before=_before(above),
                    after=tuple(clean(x) for x in below))
            )  # fmt: skip
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

"""A dead Ray worker's own last error: Ray names each worker's log after its pid
(`worker-<worker id>-<job id>-<pid>.err`), and the last traceback there is what killed it."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verl_setup.diagnose.scan import CHUNK, clean
from verl_setup.util.bounded import one_line
from verl_setup.util.secrets import mask

TAIL = 1 << 20  # a traceback is near the end of the log; read at most this much of it
_EXCEPTION = re.compile(r"^(?:\([^)]*\)\s*)?[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b.*")


@dataclass(frozen=True, kw_only=True)
class LastError:
    """The exception line ending a worker's last traceback."""

    path: str
    line: int
    text: str


def worker_logs(files: Sequence[str], pid: str | None, worker_id: str | None = None) -> list[str]:
    """The .err logs (then .out) Ray wrote for the worker with this pid or worker id."""

    def ours(f: str) -> bool:
        name = Path(f).name
        if not name.startswith("worker-") or not name.endswith((".err", ".out")):
            return False
        return bool(pid and name.endswith((f"-{pid}.err", f"-{pid}.out"))) or bool(
            worker_id and name.startswith(f"worker-{worker_id}-")
        )

    return sorted((f for f in files if ours(f)), key=lambda f: not f.endswith(".err"))


def last_traceback(files: Sequence[str], pid: str | None, worker_id: str | None = None) -> LastError | None:
    """The last exception line after a `Traceback` in the worker's own log, if it has one."""
    for path in worker_logs(files, pid, worker_id):
        found = _last_in(Path(path))
        if found is not None:
            return found
    return None


def _last_in(path: Path) -> LastError | None:
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            start = max(0, size - TAIL)
            skipped = _count_lines(handle, start)
            data = handle.read(TAIL)
    except OSError:
        return None
    lines = data.split(b"\n")
    result = None
    in_trace = False
    for index, raw in enumerate(lines):
        text = clean(raw)
        if "Traceback (most recent call last):" in text:
            in_trace = True
        elif in_trace and _EXCEPTION.match(text.strip()):
            result = LastError(
                path=one_line(str(path)), line=skipped + index + 1, text=one_line(mask(text.strip()))
            )
            in_trace = False
    return result


def _count_lines(handle: object, upto: int) -> int:
    """Newlines in the first `upto` bytes; leaves the handle at `upto`."""
    read = handle.read  # type: ignore[attr-defined]
    count, left = 0, upto
    while left > 0:
        chunk = read(min(CHUNK, left))
        if not chunk:
            break
        count += chunk.count(b"\n")
        left -= len(chunk)
    return count

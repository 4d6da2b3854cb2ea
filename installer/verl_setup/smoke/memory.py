"""Peak memory of a process tree (the driver, Ray's processes and every worker), sampled from /proc.

RSS counts pages shared between processes once per process; PSS splits them, so the PSS sum is the
tree's real share of the machine. Both are reported.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

PROC = Path("/proc")


def children_map(proc: Path = PROC) -> dict[int, list[int]]:
    """ppid -> pids, from /proc/*/stat."""
    tree: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text(encoding="ascii", errors="replace")
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def descendants(roots: Iterable[int], tree: dict[int, list[int]]) -> set[int]:
    """The roots and every process below them."""
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo += tree.get(pid, [])
    return seen


def usage(pid: int, proc: Path = PROC) -> tuple[int, int]:
    """(rss, pss) in bytes from smaps_rollup; (0, 0) for a process gone or unreadable."""
    rss = pss = 0
    with contextlib.suppress(OSError):
        for line in (proc / str(pid) / "smaps_rollup").read_text(encoding="ascii").splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("Pss:"):
                pss = int(line.split()[1]) * 1024
    return rss, pss


class PeakSampler:
    """Samples the trees under `roots()` every `every` seconds in a thread; keeps the peaks."""

    def __init__(
        self, roots: Callable[[], list[int]], every: float = 1.0, *, skip_roots: bool = False
    ) -> None:
        self.roots = roots
        self.skip_roots = skip_roots  # count only what the roots started
        self.every = every
        self.peak_rss = 0
        self.peak_pss = 0
        self.peak_processes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def sample(self) -> None:
        roots = self.roots()
        pids = descendants(roots, children_map()) - (set(roots) if self.skip_roots else set())
        rss = pss = 0
        for pid in pids:
            r, p = usage(pid)
            rss, pss = rss + r, pss + p
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_pss = max(self.peak_pss, pss)
        self.peak_processes = max(self.peak_processes, len(pids))

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

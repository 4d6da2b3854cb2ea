"""What diagnose reads: the paths given (a log file, a Slurm output, a Ray session folder), or by
default Ray's latest session where Ray itself puts it, plus the kernel's log and the cgroup's
memory.events where this user may read them."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from verl_setup.host.resources import memory_events
from verl_setup.util import runner
from verl_setup.util.bounded import one_line

MAX_FILES = 20_000  # a Ray session of a long multi-node run has thousands of worker logs
MAX_DEPTH = 32  # folder levels walked below a given folder (a Ray session has 3)


@dataclass(kw_only=True)
class Sources:
    """The files to scan, in reading order, and a note for each source that could not be read."""

    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)  # name -> text read from a program (dmesg)


def ray_temp_root(env: Mapping[str, str]) -> Path:
    """Where Ray keeps its sessions: $RAY_TMPDIR, else $TMPDIR (Linux), else /tmp; then ray/."""
    return Path(env.get("RAY_TMPDIR") or env.get("TMPDIR") or tempfile.gettempdir()) / "ray"


def default_session(env: Mapping[str, str]) -> Path:
    """Ray's latest session folder (a symlink Ray points at the running or last session)."""
    return ray_temp_root(env) / "session_latest"


def expand(paths: Sequence[Path], sources: Sources) -> None:
    """Files as given; a folder is walked (a Ray session's logs/ first), capped at MAX_FILES."""
    for path in paths:
        try:
            is_dir, exists = path.is_dir(), path.exists() or path.is_symlink()
        except (OSError, ValueError) as exc:  # a name too long, a NUL
            sources.notes.append(f"{one_line(str(path))}: {getattr(exc, 'strerror', None) or exc}")
            continue
        if is_dir:
            root = path / "logs" if (path / "logs").is_dir() else path
            found = _walk(root, sources)
            # The driver and raylet first: their lines name the worker that died.
            found.sort(key=lambda p: (not p.name.startswith(("job-driver", "driver", "raylet")), str(p)))
            sources.files += found[:MAX_FILES]
        elif exists:
            sources.files.append(path)
        else:
            sources.notes.append(f"{one_line(str(path))}: no such file or folder")


def _walk(root: Path, sources: Sources) -> list[Path]:
    """The files under `root`, in sorted order, without recursion (os.walk recurses once per level
    on Python 3.10 and 3.11: a folder 1500 levels deep raised RecursionError), at most MAX_DEPTH
    levels deep, links to folders not followed, up to MAX_FILES + 1 files."""
    found: list[Path] = []
    stack: list[tuple[Path, int]] = [(root, 0)]
    deep = False
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            sources.notes.append(f"{one_line(str(folder))}: {exc.strerror or exc}")
            continue
        subfolders = []
        for entry in entries:
            try:
                if entry.is_dir():  # a link to a folder is not followed (nor read as a file)
                    if not entry.is_symlink():
                        subfolders.append(Path(entry.path))
                    continue
            except OSError:
                pass  # a link loop: the scan notes it
            found.append(Path(entry.path))
        if depth >= MAX_DEPTH:
            deep = deep or bool(subfolders)
        else:
            stack += ((f, depth + 1) for f in reversed(subfolders))
        if len(found) > MAX_FILES:
            sources.notes.append(
                f"{one_line(str(root))}: more than {MAX_FILES} files, read the first {MAX_FILES}"
            )
            break
    if deep:
        sources.notes.append(
            f"{one_line(str(root))}: folders more than {MAX_DEPTH} levels deep were not read"
        )
    return found


def kernel_log(timeout: float = 10.0) -> tuple[str | None, str]:
    """`dmesg` output, or None and why not (it needs CAP_SYSLOG where kernel.dmesg_restrict=1)."""
    try:
        done = runner.run(["dmesg"], timeout=timeout)
    except runner.ProgramError as exc:
        return None, f"dmesg: {exc}"
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return None, f"dmesg is not readable here ({reason[:200]})"
    return done.stdout, ""


def gather(
    paths: Sequence[Path], env: Mapping[str, str], *, system: bool, dmesg: Path | None = None
) -> Sources:
    """The sources for one diagnosis: `paths`, else Ray's latest session; kernel and cgroup if `system`."""
    sources = Sources()
    if paths:
        expand(paths, sources)
    else:
        session = default_session(env)
        if session.exists():
            expand([session], sources)
        else:
            sources.notes.append(f"no Ray session at {session} (Ray's default: $RAY_TMPDIR, $TMPDIR or /tmp)")
    if dmesg is not None:
        sources.files.append(dmesg)
    elif system:
        text, why = kernel_log()
        if text is None:
            sources.notes.append(why)
        else:
            sources.texts["dmesg"] = text
    if system:
        events = memory_events()
        if events is None:
            sources.notes.append("no cgroup v2 memory.events for this process")
        else:
            sources.files.append(events)
    return sources


def failed_session(env: Mapping[str, str], limit: int = MAX_FILES) -> Path | None:
    """Ray's latest session if a worker in it wrote to its .err (a launch that already failed)."""
    logs = default_session(env) / "logs"
    try:
        with os.scandir(logs) as entries:
            for count, entry in enumerate(entries):
                if count >= limit:
                    break
                name = entry.name
                if name.startswith("worker-") and name.endswith(".err") and entry.stat().st_size > 0:
                    return logs.parent
    except OSError:
        return None
    return None

"""What diagnose reads: the paths given (a log file, a Slurm output, a Ray session folder), or by
default Ray's latest session where Ray itself puts it, plus the kernel's log and the cgroup's
memory.events where this user may read them."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from verl_setup.util import runner

MAX_FILES = 20_000  # a Ray session of a long multi-node run has thousands of worker logs
CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")


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
        if path.is_dir():
            root = path / "logs" if (path / "logs").is_dir() else path
            found: list[Path] = []
            for folder, dirs, names in os.walk(root):
                dirs.sort()
                found += (Path(folder) / n for n in sorted(names))
                if len(found) > MAX_FILES:
                    sources.notes.append(f"{root}: more than {MAX_FILES} files, read the first {MAX_FILES}")
                    break
            # The driver and raylet first: their lines name the worker that died.
            found.sort(key=lambda p: (not p.name.startswith(("job-driver", "driver", "raylet")), str(p)))
            sources.files += found[:MAX_FILES]
        elif path.exists() or path.is_symlink():
            sources.files.append(path)
        else:
            sources.notes.append(f"{path}: no such file or folder")


def memory_events(root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> Path | None:
    """This process's cgroup v2 memory.events, if it has one."""
    try:
        lines = self_cgroup.read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        hierarchy, controllers, rel = ([*line.split(":", 2), "", ""])[:3]
        if hierarchy == "0" and controllers == "":
            candidate = root / rel.lstrip("/") / "memory.events"
            if candidate.is_file():
                return candidate
    return None


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

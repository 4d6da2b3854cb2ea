"""Which of the paths given belong to one run: a verdict is one run's first cause, so two runs' logs
must not be merged into one story (issue 32). The files of one Ray session folder are one run,
and so are the files of one Slurm job; any other file given is a run of its own."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

_SLURM = re.compile(r"^slurm-(\d+)(?:_\d+)?\.(?:out|err)$")  # sbatch's default output names


def _session(path: Path) -> Path | None:
    """The Ray session folder (session_*) the path is in or is, if any."""
    for folder in (path, *path.parents):
        if folder.name.startswith("session_"):
            return folder
    return None


def run_key(path: Path) -> str:
    """What names the run a file belongs to."""
    session = _session(path)
    if session is not None:
        return f"ray session {session}"
    slurm = _SLURM.match(path.name)
    if slurm is not None:
        return f"slurm job {slurm[1]} in {path.parent}"
    return str(path)


def split_runs(paths: Sequence[Path]) -> list[list[Path]]:
    """The paths grouped by run, in the order given; a folder that is not a Ray session is read as
    its Slurm jobs when it holds slurm-*.out files, else as one run."""
    groups: dict[str, list[Path]] = {}
    for path in paths:
        members = [path]
        if path.is_dir() and _session(path) is None:
            jobs = sorted(p for p in path.iterdir() if _SLURM.match(p.name))
            members = jobs or [path]
        for member in members:
            groups.setdefault(run_key(member), []).append(member)
    return list(groups.values())

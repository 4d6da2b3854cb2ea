"""`diagnose`'s use case: the paths given, grouped into runs, each run read and diagnosed.

diagnose_paths(request, env) -> Verdicts. One run (or none given: Ray's latest session) is read
with the host's own sources (dmesg, the cgroup's memory.events) unless told not to; several runs
are each diagnosed on their own, without them (they belong to no one run).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_setup.diagnose.runs import split_runs
from verl_setup.diagnose.several import several_json, several_text
from verl_setup.diagnose.sources import gather
from verl_setup.diagnose.verdict import Diagnosis, diagnose, text_report
from verl_setup.errors import BadInputError
from verl_setup.util.bounded import one_line


@dataclass(frozen=True, kw_only=True)
class DiagnoseRequest:
    """What a failed run left behind (none: Ray's latest session), and whether to read the host's
    own sources too (dmesg, or a saved one; the cgroup's memory.events)."""

    paths: tuple[Path, ...] = ()
    system: bool = True
    dmesg: Path | None = None


@dataclass(frozen=True, kw_only=True)
class Verdicts:
    """One verdict per run, with the paths it was read from."""

    runs: tuple[tuple[tuple[Path, ...], Diagnosis], ...]

    def to_json(self) -> dict[str, Any]:
        """The --json data (the envelope's): one run's verdict, or several's under `runs`."""
        return self.runs[0][1].to_json() if len(self.runs) == 1 else several_json(self.runs)

    def text(self) -> str:
        """The text report."""
        return text_report(self.runs[0][1]) if len(self.runs) == 1 else several_text(self.runs)


def diagnose_paths(request: DiagnoseRequest, env: Mapping[str, str]) -> Verdicts:
    """Diagnose each run; exit 2 (bad input) when none of the paths given exists."""
    paths = request.paths
    missing = [p for p in paths if not (p.exists() or p.is_symlink())]
    if paths and len(missing) == len(paths):
        raise BadInputError(f"diagnose: no such file or folder: {one_line(str(missing[0]))}")
    runs = split_runs([p for p in paths if p not in missing])
    if len(runs) > 1:  # one verdict per run, never one story across runs
        return Verdicts(runs=tuple((tuple(g), diagnose(gather(list(g), env, system=False))) for g in runs))
    sources = gather(list(paths), env, system=request.system, dmesg=request.dmesg)
    return Verdicts(runs=((paths, diagnose(sources)),))

"""Several runs given at once: each diagnosed on its own (diagnose/runs.py groups them), printed
one after another; the JSON keeps the first run's verdict at the top and every run under `runs`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verl_setup.diagnose.verdict import Diagnosis, text_report

HOST_NOTE = (
    "dmesg and the cgroup's memory.events belong to no one run: they were not read "
    "(diagnose one run at a time to include them)"
)


def several_json(results: Sequence[tuple[Sequence[Path], Diagnosis]]) -> dict[str, Any]:
    """The --json data for several runs: the first run's verdict at the top, every run under `runs`."""
    entries: list[dict[str, Any]] = [
        {"paths": [str(p) for p in group], **result.to_json()} for group, result in results
    ]
    first = results[0][1].to_json()
    return {**first, "notes": [*first["notes"], HOST_NOTE], "runs": entries}


def several_text(results: Sequence[tuple[Sequence[Path], Diagnosis]]) -> str:
    """The report for several runs: one verdict each."""
    grouping = "the files of one Ray session or one Slurm job are one run"
    out = [f"diagnose: {len(results)} runs, each on its own ({grouping})"]
    for i, (group, result) in enumerate(results, 1):
        out.append(f"== run {i} of {len(results)}: {', '.join(str(p) for p in group)}")
        out.append(text_report(result).rstrip("\n"))
    out.append(f"note: {HOST_NOTE}")
    return "\n".join(out) + "\n"

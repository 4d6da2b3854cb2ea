"""Several runs given at once: each diagnosed on its own (diagnose/runs.py groups them), printed
one after another; the JSON keeps the first run's verdict at the top and every run under `runs`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verl_setup.diagnose.sources import gather
from verl_setup.diagnose.verdict import diagnose, text_report
from verl_setup.output import envelope

HOST_NOTE = (
    "dmesg and the cgroup's memory.events belong to no one run: they were not read "
    "(diagnose one run at a time to include them)"
)


def several_runs(runs: Sequence[Sequence[Path]], env: Mapping[str, str], *, as_json: bool) -> str:
    """The report for several runs: one verdict each."""
    results = [(group, diagnose(gather(list(group), env, system=False))) for group in runs]
    if as_json:
        entries: list[dict[str, Any]] = [
            {"paths": [str(p) for p in group], **result.to_json()} for group, result in results
        ]
        first = results[0][1].to_json()
        return envelope("diagnose", {**first, "notes": [*first["notes"], HOST_NOTE], "runs": entries})
    grouping = "the files of one Ray session or one Slurm job are one run"
    out = [f"diagnose: {len(runs)} runs, each on its own ({grouping})"]
    for i, (group, result) in enumerate(results, 1):
        out.append(f"== run {i} of {len(runs)}: {', '.join(str(p) for p in group)}")
        out.append(text_report(result).rstrip("\n"))
    out.append(f"note: {HOST_NOTE}")
    return "\n".join(out) + "\n"

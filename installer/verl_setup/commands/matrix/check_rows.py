"""`verl-setup matrix check`: re-resolve rows today, compare with their baseline.

Exit codes: 0 every row still installs as the matrix says, drift included (newer releases inside
the pins' ranges, a dependency added or dropped, a re-upload: reported, never a failure); 5 a
regression (a row no longer resolves, a pin or a baseline distribution yanked or deleted, a
package installed last gone, a glibc floor above the row's; a wheel a wheel source is said to
serve missing, or changed under the same name); 4 the index or a wheel source could not be read.
Drift is said apart from regressions (`drifted` in --json).

Flags -> CheckRequest -> maintenance.check_job.check_rows -> print."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TextIO

from verl_setup.maintenance.check import RowCheck
from verl_setup.maintenance.check_job import CheckRequest, check_rows
from verl_setup.maintenance.source_check import SourceCheck
from verl_setup.matrix.load import Matrix
from verl_setup.output import Progress, emit


def text(results: Sequence[RowCheck]) -> str:
    """One line per row, then what moved and why."""
    lines = []
    for r in results:
        mark = "REGRESSED" if r.regressed else "-" if r.status == "skipped" else "ok"
        lines.append(f"{r.row:<34} {r.status:<22} {mark:<9} {r.seconds:.0f}s")
        if r.reason:
            lines.append(f"    {r.reason}")
        if r.floor is not None:
            setters = f" (set by {', '.join(r.floor.set_by)})" if r.floor.set_by else ""
            lines.append(f"    glibc floor of its wheels: {r.floor.glibc or 'none'}{setters}")
        if r.floor_above:
            lines.append(f"    glibc floor above the row: {r.floor_above} (regression)")
        lines.extend(f"    {y}" for y in r.yanked)
        lines.extend(f"    installed last: {x}" for x in r.loose)
        lines.extend(f"    installed last: {x} (regression)" for x in r.loose_gone)
        # Drift inside the ranges is the common case (dozens a month): one line for all of it.
        newer = [m for m in r.moved if m.why.startswith("a newer release")]
        for m in r.moved:
            if m not in newer:
                flag = " (regression)" if m.regression else ""
                lines.append(f"    {m.name}: {m.was or '-'} -> {m.now or '-'}: {m.why}{flag}")
        if newer:
            moves = ", ".join(f"{m.name} {m.was}->{m.now}" for m in newer)
            lines.append(f"    {len(newer)} newer releases within the pins' ranges: {moves}")
    return "\n".join(lines) + "\n"


def sources_text(checks: Sequence[SourceCheck]) -> str:
    """One line per wheel source, then each wheel that is not simply present."""
    lines = []
    for c in checks:
        mark = "DRIFTED" if c.drifted else "unreachable" if c.unreachable else "ok"
        present = sum(f.status == "present" for f in c.findings)
        lines.append(f"wheel source {c.source:<21} {mark:<11} {present} of its promised wheels present")
        lines.extend(f"    world {w} is empty" for w in c.empty_worlds())
        lines.extend(f"    {f.words()}" for f in c.findings if f.status != "present")
        lines.extend(f"    unreachable: {u}" for u in c.unreachable)
    return "\n".join(lines) + "\n" if lines else ""


def command(
    row_ids: Sequence[str],
    matrix: Matrix,
    *,
    json_out: bool,
    record: bool,
    env: Mapping[str, str],
    out: TextIO,
    quiet: bool = False,
) -> int:
    """Check the rows (all when none are named); exit 5 when any regressed."""
    progress = Progress(quiet=quiet)
    report = check_rows(CheckRequest(matrix=matrix, row_ids=tuple(row_ids), record=record), env, progress)
    drifted = report.drifted
    if drifted and not json_out:
        progress.say(f"drift, not a failure: {len(drifted)} rows resolve differently ({', '.join(drifted)})")
    error = report.error()
    if json_out:
        emit(out, "matrix check", report.to_json(), error)
    else:
        out.write(text(report.rows) + sources_text(report.sources))
    if error is not None:
        raise error
    return 0

"""`verl-setup matrix check`: re-resolve rows today, compare with their baseline.

Exit codes: 0 every row still installs as the matrix says, drift included (newer releases inside
the pins' ranges, a dependency added or dropped, a re-upload: reported, never a failure); 5 a
regression (a row no longer resolves, a pin or a baseline distribution yanked or deleted, a
package installed last gone, a glibc floor above the row's; a wheel a wheel source is said to
serve missing, or changed under the same name); 4 the index or a wheel source could not be read.
Drift is said apart from regressions (`drifted` in --json)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from verl_setup.environment.uv import uv_and_env
from verl_setup.errors import CheckFailedError, InstallError, VerlSetupError
from verl_setup.maintenance.check import RowCheck, check_row, default_index, indexes_for
from verl_setup.maintenance.closure_targets import with_targets
from verl_setup.maintenance.source_check import SourceCheck, check_source, checkable, worlds_of
from verl_setup.matrix.load import Matrix
from verl_setup.matrix.proof import today
from verl_setup.matrix.resolved import load_resolved, record_resolved
from verl_setup.matrix.schema import Row
from verl_setup.matrix.wheel_seen import load_seen, record_seen
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


def check_sources(
    matrix: Matrix, rows: Sequence[Row] | None, *, record: bool, say: Callable[[str], None]
) -> list[SourceCheck]:
    """Read the enabled wheel sources' worlds (those serving `rows`, or all), record if asked."""
    from verl_setup.environment.wheel_pick import wheel_links  # noqa: PLC0415

    seen, date, checks = load_seen(matrix.path), today(), []
    for source in checkable(matrix.rows_file):
        if rows is not None and not worlds_of(source, rows):
            continue  # none of the named rows takes a wheel from it
        say(f"wheel source {source.id}: reading its worlds")
        checks.append(check_source(source, seen.get(source.id), today=date, links=wheel_links, rows=rows))
    if record:
        updates = {c.source: r for c in checks if (r := c.record(seen.get(c.source))) is not None}
        if updates:
            say(f"recorded what {len(updates)} wheel sources hold in {record_seen(matrix.path, updates)}")
    return checks


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
    rows = [matrix.row(r) for r in row_ids] if row_ids else list(matrix.rows)
    progress = Progress(quiet=quiet)
    uv, uv_environment = uv_and_env(env, progress.say)
    baseline = load_resolved(matrix.path)
    default = default_index(uv, uv_environment)
    start = time.monotonic()
    results = []
    for row in rows:
        progress.say(f"{row.id}: resolving")
        results.append(
            check_row(
                row,
                matrix,
                baseline.get(row.id),
                uv=uv,
                env=uv_environment,
                indexes=indexes_for(row, matrix, default),
            )
        )
    sources = check_sources(matrix, rows if row_ids else None, record=record, say=progress.say)
    seconds = round(time.monotonic() - start, 1)
    if record:
        updates = {
            r.row: with_targets(
                r.resolution, matrix.row(r.row), matrix, uv=uv, env=uv_environment, say=progress.say
            )
            for r in results
            if r.resolution is not None and not r.regressed
        }
        if updates:
            progress.say(f"recorded {len(updates)} resolutions in {record_resolved(matrix.path, updates)}")
    regressed = [r.row for r in results if r.regressed]
    drifted = [r.row for r in results if r.drifted]
    if drifted and not json_out:
        progress.say(f"drift, not a failure: {len(drifted)} rows resolve differently ({', '.join(drifted)})")
    moved_sources = [c.source for c in sources if c.drifted]
    unreachable = [c.source for c in sources if c.unreachable]
    error: VerlSetupError | None = None
    if regressed or moved_sources:
        parts = []
        if regressed:
            parts.append(f"{len(regressed)} of {len(results)} rows regressed: {', '.join(regressed)}")
        if moved_sources:
            parts.append(f"wheel sources no longer hold what the matrix promises: {', '.join(moved_sources)}")
        error = CheckFailedError("; ".join(parts))
    elif unreachable:  # an outage says nothing about the source: exit 4, not 5
        error = InstallError(f"wheel sources could not be read: {', '.join(unreachable)}")
    if json_out:
        data = {
            "rows": [r.to_json() for r in results],
            "regressed": regressed,
            "drifted": drifted,
            "wheel_sources": [c.to_json() for c in sources],
            "wheel_sources_drifted": moved_sources,
            "seconds": seconds,
        }
        emit(out, "matrix check", data, error)
    else:
        out.write(text(results) + sources_text(sources))
    if error is not None:
        raise error
    return 0

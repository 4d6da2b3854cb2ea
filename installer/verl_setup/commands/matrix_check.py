"""`verl-setup matrix check`: re-resolve rows today, compare with their baseline.

Exit codes: 0 every row still installs as the matrix says, drift included (newer releases inside
the pins' ranges, a dependency added or dropped, a re-upload: reported, never a failure); 5 a
regression (a row no longer resolves, a pin or a baseline distribution yanked or deleted, a
package installed last gone, a glibc floor above the row's); 4 the index could not be reached.
Drift is said apart from regressions (`drifted` in --json)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TextIO

from verl_setup.environment.uv import uv_env
from verl_setup.errors import CheckFailedError
from verl_setup.maintenance.check import RowCheck, check_row, default_index, indexes_for
from verl_setup.maintenance.resolved import load_resolved, record_resolved
from verl_setup.matrix.load import Matrix
from verl_setup.output import Progress, emit
from verl_setup.util.uvbin import find_uv


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
    uv, uv_environment = find_uv(), uv_env(base=env, warn=progress.say)
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
    seconds = round(time.monotonic() - start, 1)
    if record:
        updates = {r.row: r.resolution for r in results if r.resolution is not None and not r.regressed}
        if updates:
            progress.say(f"recorded {len(updates)} resolutions in {record_resolved(matrix.path, updates)}")
    regressed = [r.row for r in results if r.regressed]
    drifted = [r.row for r in results if r.drifted]
    if drifted and not json_out:
        progress.say(f"drift, not a failure: {len(drifted)} rows resolve differently ({', '.join(drifted)})")
    error = (
        CheckFailedError(f"{len(regressed)} of {len(results)} rows regressed: {', '.join(regressed)}")
        if regressed
        else None
    )
    if json_out:
        data = {
            "rows": [r.to_json() for r in results],
            "regressed": regressed,
            "drifted": drifted,
            "seconds": seconds,
        }
        emit(out, "matrix check", data, error)
    else:
        out.write(text(results))
    if error is not None:
        raise error
    return 0

"""`matrix check`'s use case: re-resolve the rows, read the wheel sources, record the baselines.

check_rows(request, env, progress) -> CheckReport: every row through maintenance/check.py's
check_row, the wheel sources the rows use through source_check, and with `record` today's
resolutions (matrices/resolved.yaml) and what each source holds (wheel-sources-seen.yaml)
written; a regression never overwrites the baseline it was found against. The report says
which error the check ends in (5 a regression, 4 an unreadable source); the command prints it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
from verl_setup.output import Progress


@dataclass(frozen=True, kw_only=True)
class CheckRequest:
    """Which rows of which matrix (none named: every row, and every wheel source), and whether
    to record today's answers as the baseline."""

    matrix: Matrix
    row_ids: tuple[str, ...] = ()
    record: bool = False


@dataclass(frozen=True, kw_only=True)
class CheckReport:
    """Each row's check and each wheel source's, and how long the rows and sources took."""

    rows: tuple[RowCheck, ...]
    sources: tuple[SourceCheck, ...]
    seconds: float

    @property
    def regressed(self) -> list[str]:
        return [r.row for r in self.rows if r.regressed]

    @property
    def drifted(self) -> list[str]:
        return [r.row for r in self.rows if r.drifted]

    @property
    def moved_sources(self) -> list[str]:
        return [c.source for c in self.sources if c.drifted]

    @property
    def unreachable(self) -> list[str]:
        return [c.source for c in self.sources if c.unreachable]

    def error(self) -> VerlSetupError | None:
        """5 for a regression or a wheel source that moved; 4 when a source could not be read."""
        regressed, moved = self.regressed, self.moved_sources
        if regressed or moved:
            parts = []
            if regressed:
                parts.append(f"{len(regressed)} of {len(self.rows)} rows regressed: {', '.join(regressed)}")
            if moved:
                parts.append(f"wheel sources no longer hold what the matrix promises: {', '.join(moved)}")
            return CheckFailedError("; ".join(parts))
        if self.unreachable:  # an outage says nothing about the source: exit 4, not 5
            return InstallError(f"wheel sources could not be read: {', '.join(self.unreachable)}")
        return None

    def to_json(self) -> dict[str, Any]:
        """The --json data (the envelope's)."""
        return {
            "rows": [r.to_json() for r in self.rows],
            "regressed": self.regressed,
            "drifted": self.drifted,
            "wheel_sources": [c.to_json() for c in self.sources],
            "wheel_sources_drifted": self.moved_sources,
            "seconds": self.seconds,
        }


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


def check_rows(request: CheckRequest, env: Mapping[str, str], progress: Progress) -> CheckReport:
    """Check the rows (all when none are named) and the wheel sources they use; record if asked."""
    matrix = request.matrix
    rows = [matrix.row(r) for r in request.row_ids] if request.row_ids else list(matrix.rows)
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
    named = rows if request.row_ids else None
    sources = check_sources(matrix, named, record=request.record, say=progress.say)
    seconds = round(time.monotonic() - start, 1)
    if request.record:
        updates = {
            r.row: with_targets(
                r.resolution, matrix.row(r.row), matrix, uv=uv, env=uv_environment, say=progress.say
            )
            for r in results
            if r.resolution is not None and not r.regressed
        }
        if updates:
            progress.say(f"recorded {len(updates)} resolutions in {record_resolved(matrix.path, updates)}")
    return CheckReport(rows=tuple(results), sources=tuple(sources), seconds=seconds)

"""A row's closure on every target it supports: its other Python minors and architectures, each
resolved as the base target is, preferring the base set's versions (so a target moves only what its
Python or arch needs), and stored as what differs from it (matrices/resolved.yaml)."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Mapping

from verl_setup.environment.closure_moves import upload_dates
from verl_setup.environment.uv import explain_failure
from verl_setup.maintenance.check import resolution_of, resolve
from verl_setup.matrix.load import Matrix
from verl_setup.matrix.resolved import Resolution, delta, target_key
from verl_setup.matrix.schema import Row


def with_targets(
    resolution: Resolution,
    row: Row,
    matrix: Matrix,
    *,
    uv: str,
    env: Mapping[str, str],
    say: Callable[[str], None],
) -> Resolution:
    """The resolution, dated today, with the differences of every other target of the row. A target
    that does not resolve is left out (an install there falls back to --exclude-newer), and said."""
    base = {name: version for name, (version, _) in resolution.pins.items()}
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    # The other targets as the index stood when the base set was resolved: one closure, one date.
    newest = resolution.as_of or newest_upload(base, uv, env) or resolution.recorded or today
    as_of = f"{newest}T23:59:59Z"
    targets: dict[str, dict[str, str | None]] = {}
    for arch in row.requires.arch:
        for minor in row.python.supported:
            key = target_key(minor, arch)
            if key == resolution.base_target:
                continue
            say(f"{row.id}: resolves for Python {minor} on {arch} (the closure there)")
            code, out, err = resolve(
                row, matrix, uv, env, python=minor, arch=arch, exclude_newer=as_of, prefer=base
            )
            if code != 0:
                say(f"{row.id}: Python {minor} on {arch} does not resolve: {explain_failure(err)}")
                continue
            targets[key] = delta(base, {n: v for n, (v, _) in resolution_of(out).items()})
    return dataclasses.replace(
        resolution, targets=targets, recorded=resolution.recorded or today, as_of=newest
    )


def newest_upload(pins: Mapping[str, str], uv: str, env: Mapping[str, str]) -> str | None:
    """The newest upload date among the pins' releases on the index uv is configured with (a pin
    that index lacks, such as torch from its own index, is skipped)."""
    dates = upload_dates(sorted(pins.items()), uv, env).values()
    return max(dates) if dates else None

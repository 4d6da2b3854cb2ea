"""Does a row install whole here: does every package it builds against torch come as a wheel from
an enabled wheel source of the matrix (as `matrix check` last saw them), so that no build and no
--without is needed? Data only (no network): `install` looks again before relying on a source."""

from __future__ import annotations

from verl_setup.matrix.load import Matrix
from verl_setup.matrix.schema import Row
from verl_setup.matrix.wheel_seen import load_seen
from verl_setup.plan.wheel_sources import candidates, ordered_sources


def missing_wheels(row: Row, matrix: Matrix, *, python: str, glibc: str | None) -> list[str]:
    """One line per package built against torch that no enabled source serves for this target
    ("flash-attn 2.8.3: verl-wheelhouse: ..."); empty: the row installs whole."""
    facts = matrix.rows_file.torch_extensions
    sources = ordered_sources(matrix.rows_file, ())
    seen = load_seen(matrix.path)
    out = []
    for name, ext in facts.items():
        if name not in row.packages:
            continue
        version = row.packages[name]
        found, why_not = candidates(
            sources, ext, row, name=name, version=version, python=python, glibc=glibc, seen=seen
        )
        if not found:
            out.append(f"{name} {version}: {'; '.join(why_not) or 'no wheel source lists it'}")
    return out

"""Every matrix row resolves with real uv against the package index, for its target Python and
platform, exactly as pinned; and each engine's own metadata pins the row's torch.

Network test: ~5-20 s per row. VERL_SETUP_RESOLVE_ALL_PYTHONS=1 also resolves every supported
minor, not only the recommended one.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from verl_setup.environment.uv import compile_command, uv_env, write_inputs
from verl_setup.matrix.load import load_matrix
from verl_setup.matrix.schema import Row
from verl_setup.util.runner import run
from verl_setup.util.uvbin import find_uv
from verl_setup.util.versions import minor_of

MATRIX = load_matrix()
UV_TIMEOUT = 300.0
# What uv prints when it cannot reach an index (as opposed to a resolution conflict).
UNREACHABLE = re.compile(
    r"error sending request|dns error|Failed to fetch|Could not connect|tcp connect error|timed out",
    re.I,
)

pytestmark = [pytest.mark.network, pytest.mark.slow]


def cases() -> list[tuple[Row, str]]:
    out = []
    for row in MATRIX.rows:
        minors = (
            row.python.supported
            if os.environ.get("VERL_SETUP_RESOLVE_ALL_PYTHONS")
            else [minor_of(row.python.recommended)]
        )
        out += [(row, minor) for minor in minors]
    return out


def resolved_together(row: Row) -> list[str]:
    """The row's index pins that one resolution holds: not those installed last without their
    dependencies (`no_deps`, `sources`), whose own pins would move the stack (as in verl's uv flow)."""
    loose = {*row.no_deps, *row.sources}
    return [r for r in MATRIX.rows_file.from_index(row) if r.split("==")[0].split("[")[0] not in loose]


def resolve(row: Row, python: str, folder: Path, requirements: list[str] | None = None) -> dict[str, str]:
    req_file, overrides = write_inputs(row, folder, resolved_together(row))
    if requirements is not None:
        req_file.write_text("\n".join(requirements) + "\n")
    argv = compile_command(
        find_uv(), row=row, matrix=MATRIX, python=python, requirements=req_file, overrides=overrides
    )
    # Resolutions are binary-only; the packages built against torch are built on purpose (the
    # recipe's own step gives them --no-binary), so their sdists may be read here too.
    for name in MATRIX.rows_file.torch_extensions:
        if name in row.packages:
            argv += ["--no-binary", name]
    out = run(argv, timeout=UV_TIMEOUT, env=uv_env())
    if out.returncode != 0:
        if MATRIX.index_url(row) and UNREACHABLE.search(out.stderr):
            pytest.skip(f"row {row.id}: index {MATRIX.index_url(row)} cannot be reached from here")
        pytest.fail(f"row {row.id} does not resolve for Python {python}:\n{out.stderr[-3000:]}")
    pins: dict[str, str] = {}
    for line in out.stdout.splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==(\S+)", line)
        if m:
            pins[canonicalize_name(m[1])] = m[2]
    return pins


@pytest.mark.parametrize(("row", "python"), cases(), ids=lambda v: v.id if isinstance(v, Row) else f"py{v}")
def test_row_resolves_exactly_as_pinned(row: Row, python: str, tmp_path: Path) -> None:
    pins = resolve(row, python, tmp_path)
    expected = {
        canonicalize_name(line.split("==")[0].split("[")[0]): line.split("==")[1]
        for line in resolved_together(row)
    }
    wrong = {name: (want, pins.get(name)) for name, want in expected.items() if pins.get(name) != want}
    assert not wrong, f"{row.id}: pinned vs resolved {wrong}"


ENGINE_ROWS = [r for r in MATRIX.rows if r.engine.name != "none"]


@pytest.mark.parametrize("row", ENGINE_ROWS, ids=lambda r: r.id)
def test_engine_metadata_pins_the_rows_torch(row: Row, tmp_path: Path) -> None:
    # Resolve the engine alone: the torch it drags in is what its own metadata pins.
    python = minor_of(row.python.recommended)
    # sglang up to 0.5.2 keeps its torch pin under the [srt] extra.
    extra = "[srt]" if row.engine.name == "sglang" else ""
    pins = resolve(row, python, tmp_path, [f"{row.engine.name}{extra}=={row.engine.version}"])
    torch = pins.get("torch")
    assert torch is not None
    assert torch == row.torch.version.split("+")[0], (
        f"{row.engine.name} {row.engine.version} pins torch {torch}"
    )

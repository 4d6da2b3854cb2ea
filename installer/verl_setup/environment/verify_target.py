"""What `verify` and `report` compare an environment with: its lock, a row's pins, or the manifest
install wrote into it (verl-setup.json), and what that manifest says of the row and its packages."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verl_setup.environment.lock import Lock, read_lock
from verl_setup.environment.verify import (
    MANIFEST,
    Expected,
    Report,
    Snapshot,
    from_lock,
    from_manifest,
    from_requirements,
    target_python,
    verify_env,
)
from verl_setup.errors import BadInputError
from verl_setup.matrix.load import load_matrix
from verl_setup.matrix.schema import Row


def expected_from(snap: Snapshot, *, lock: Lock | None, row: Row | None) -> Expected:
    """The lock's distributions, else the row's pins, else the environment's own manifest."""
    if lock is not None:
        return from_lock(lock, snap.markers)
    if row is not None:
        return from_requirements(f"row {row.id}", row.requirements())
    manifest = from_manifest(Path(snap.prefix) / MANIFEST)
    if manifest is None:
        raise BadInputError(
            f"nothing to compare {snap.prefix} with: it has no {MANIFEST} (not installed by "
            "verl-setup); give --lock FILE or --row ID"
        )
    return manifest


def manifest_row(python: Path) -> tuple[str | None, list[str]]:
    """The row id the manifest beside `python`'s environment names, and the packages built
    against torch it left out on purpose; (None, []) without a readable manifest."""
    try:
        record = json.loads((python.parent.parent / MANIFEST).read_text(encoding="utf-8"))
        left = [n for n, e in (record.get("torch_extensions") or {}).items() if e.get("mode") == "without"]
        return str(record["row"]["id"]), left
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, []


def report_verify(prefix: Path | None, env: Mapping[str, str], *, imports: bool) -> str:
    """`report`'s verify section: the environment against its manifest, pins only unless `imports`."""
    from verl_setup.environment.user_verify import user_lines  # noqa: PLC0415

    python = target_python(prefix, None, env)
    where = python.parent.parent
    if not (where / MANIFEST).is_file():
        return f"not run: {where} has no {MANIFEST} (it was not installed by verl-setup)"
    result: Report = verify_env(
        python,
        lambda snap: expected_from(snap, lock=None, row=None),
        import_timeout=900.0 if imports else None,
        env=env,
    )
    try:
        mine = user_lines(json.loads((where / MANIFEST).read_text(encoding="utf-8")))
    except (OSError, ValueError, AttributeError):
        mine = []
    head = "".join(f"{line}\n" for line in mine)
    return head + result.text() + ("" if imports else "(pins only: --imports adds the import probe)\n")


@dataclass(frozen=True, kw_only=True)
class VerifyRequest:
    """One environment to verify (`verify` without --ray): against the lock, else --row's pins,
    else its manifest."""

    python: Path
    lock_file: Path | None = None  # a lock file (requirements or pylock), read here
    row: str | None = None  # a matrix row's id
    matrix: Path | None = None  # the rows file for `row` (default: the installed one)
    import_timeout: float | None = 900.0  # None: no import probe


def verify_target(request: VerifyRequest, env: Mapping[str, str]) -> Report:
    """`verify`'s use case: the environment's report against what it should hold."""
    lock = read_lock(request.lock_file) if request.lock_file else None
    row = load_matrix(request.matrix).row(request.row) if request.row else None

    def expected_for(snap: Snapshot) -> Expected:
        return expected_from(snap, lock=lock, row=row)

    gpu_only, left_out, known = _row_facts(request)
    return verify_env(
        request.python,
        expected_for,
        import_timeout=request.import_timeout,
        env=env,
        gpu_only=gpu_only,
        left_out=left_out,
        known=known,
    )


def _row_facts(request: VerifyRequest) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The row's modules that need an NVIDIA driver to import (--row, else the manifest's row), the
    modules of packages the install left out on purpose (the manifest's torch_extensions), and the
    imports the row's known issues break."""
    found, left = manifest_row(request.python)
    row_id = request.row or found
    if row_id is None:
        return {}, {}, {}
    matrix = load_matrix(request.matrix)
    row = next((r for r in matrix.rows if r.id == row_id), None)
    gpu_only = dict(row.gpu_only_imports) if row else {}
    known = dict(row.known_broken_imports) if row else {}
    return gpu_only, matrix.rows_file.left_out_modules(left), known

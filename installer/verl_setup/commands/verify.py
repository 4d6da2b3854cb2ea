"""`verl-setup verify`: one environment against its manifest, a lock or a row; or a Ray cluster."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.cluster.verify import verify_cluster
from verl_setup.environment.lock import read_lock
from verl_setup.environment.verify import (
    Expected,
    Snapshot,
    target_python,
    verify_env,
)
from verl_setup.environment.verify_target import expected_from, manifest_row
from verl_setup.errors import CheckFailedError
from verl_setup.matrix.load import load_matrix
from verl_setup.output import emit


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The verify flags: which environment, against what."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--prefix", type=Path, metavar="PATH", help="a venv (default $VIRTUAL_ENV, .venv)")
    where.add_argument("--python", metavar="EXE", help="an interpreter")
    p.add_argument("--lock", type=Path, metavar="FILE", help="compare with this lock")
    p.add_argument("--row", metavar="ID", help="compare with a matrix row's pins (no manifest, no lock)")
    p.add_argument("--matrix", type=Path, metavar="FILE", help="rows file for --row")
    p.add_argument("--ray", metavar="ADDRESS", help="verify every alive node of this Ray cluster")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="hard limit for --ray (120)")
    p.add_argument("--no-import", action="store_true", help="skip the import probe")
    p.add_argument(
        "--import-timeout", type=float, default=900.0, metavar="S", help="for the import probe (900)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Verify; exit 5 with the differences when the environment does not match."""
    python = target_python(args.prefix, args.python, env)
    lock = read_lock(args.lock) if args.lock else None
    if args.ray:
        return verify_cluster(
            python, args.ray, lock=lock, timeout=args.timeout, env=env, out=out, as_json=args.json
        )

    row = load_matrix(args.matrix).row(args.row) if args.row else None

    def expected_for(snap: Snapshot) -> Expected:
        return expected_from(snap, lock=lock, row=row)

    timeout = None if args.no_import else args.import_timeout
    gpu_only, left_out, known = _row_facts(args, python)
    report = verify_env(
        python,
        expected_for,
        import_timeout=timeout,
        env=env,
        gpu_only=gpu_only,
        left_out=left_out,
        known=known,
    )
    error = None if report.ok else CheckFailedError(report.summary())
    if args.json:
        emit(out, "verify", report.to_json(), error)
    else:
        out.write(report.text())
    if error is not None:
        raise error
    return 0


def _row_facts(
    args: argparse.Namespace, python: Path
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The row's modules that need an NVIDIA driver to import (--row, else the manifest's row), the
    modules of packages the install left out on purpose (the manifest's torch_extensions), and the
    imports the row's known issues break."""
    found, left = manifest_row(python)
    row_id = args.row or found
    if row_id is None:
        return {}, {}, {}
    matrix = load_matrix(args.matrix)
    row = next((r for r in matrix.rows if r.id == row_id), None)
    gpu_only = dict(row.gpu_only_imports) if row else {}
    known = dict(row.known_broken_imports) if row else {}
    return gpu_only, matrix.rows_file.left_out_modules(left), known

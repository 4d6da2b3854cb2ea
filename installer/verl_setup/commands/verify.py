"""`verl-setup verify`: one environment against its manifest, a lock or a row; or a Ray cluster."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.cluster.verify import verify_cluster
from verl_setup.environment.verify import target_python
from verl_setup.environment.verify_target import VerifyRequest, verify_target
from verl_setup.errors import CheckFailedError
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
    if args.ray:
        return verify_cluster(
            python, args.ray, lock_file=args.lock, timeout=args.timeout, env=env, out=out, as_json=args.json
        )
    request = VerifyRequest(
        python=python,
        lock_file=args.lock,
        row=args.row,
        matrix=args.matrix,
        import_timeout=None if args.no_import else args.import_timeout,
    )
    report = verify_target(request, env)
    error = None if report.ok else CheckFailedError(report.summary())
    if args.json:
        emit(out, "verify", report.to_json(), error)
    else:
        out.write(report.text())
    if error is not None:
        raise error
    return 0

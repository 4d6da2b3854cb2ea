"""`verl-setup diagnose [PATH...]`: read what a failed run left behind and name its first cause.

Flags -> DiagnoseRequest -> diagnose.diagnose_job.diagnose_paths -> print."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.diagnose.diagnose_job import DiagnoseRequest, diagnose_paths
from verl_setup.output import envelope


def add_arguments(p: argparse.ArgumentParser) -> None:
    """diagnose's flags."""
    p.add_argument(
        "paths", nargs="*", type=Path, metavar="PATH",
        help="a driver log, a Slurm output, or a Ray session folder (default: Ray's session_latest "
        "under $RAY_TMPDIR, $TMPDIR or /tmp)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="machine-readable verdict (schema 1)")
    p.add_argument("--dmesg", type=Path, metavar="FILE", help="a saved `dmesg` instead of running it")
    p.add_argument(
        "--no-system", action="store_true", help="read only PATHs: not dmesg, not the cgroup's memory.events"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Print the verdict; exit 0 when it ran (an "unknown" verdict included), 2 when no PATH exists."""
    request = DiagnoseRequest(paths=tuple(args.paths), system=not args.no_system, dmesg=args.dmesg)
    verdicts = diagnose_paths(request, env)
    out.write(envelope("diagnose", verdicts.to_json()) if args.json else verdicts.text())
    out.flush()
    return 0

"""`verl-setup diagnose [PATH...]`: read what a failed run left behind and name its first cause."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.diagnose.runs import split_runs
from verl_setup.diagnose.several import several_runs
from verl_setup.diagnose.sources import gather
from verl_setup.diagnose.verdict import diagnose, text_report
from verl_setup.errors import BadInputError
from verl_setup.output import envelope
from verl_setup.util.bounded import one_line


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
    missing = [p for p in args.paths if not (p.exists() or p.is_symlink())]
    if args.paths and len(missing) == len(args.paths):
        raise BadInputError(f"diagnose: no such file or folder: {one_line(str(missing[0]))}")
    runs = split_runs([p for p in args.paths if p not in missing])
    if len(runs) > 1:  # one verdict per run, never one story across runs
        out.write(several_runs(runs, env, as_json=args.json))
        out.flush()
        return 0
    sources = gather(args.paths, env, system=not args.no_system, dmesg=args.dmesg)
    result = diagnose(sources)
    out.write(envelope("diagnose", result.to_json()) if args.json else text_report(result))
    out.flush()
    return 0

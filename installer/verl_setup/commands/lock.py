"""`verl-setup lock`: plan, resolve with hashes, write the lock (atomically) or print it, as a
hashed requirements file (the default) or PEP 751's pylock.toml (`--format pylock`)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import extension_requests, plan_inputs, user_packages, wheel_sources
from verl_setup.commands.flags import add_plan_flags, add_recipe_flags
from verl_setup.environment.lock_job import LockRequest, lock_to
from verl_setup.errors import BadInputError
from verl_setup.output import Progress, envelope


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The lock flags."""
    p.add_argument("--out", type=Path, metavar="FILE", help="write the lock here (default: stdout)")
    p.add_argument(
        "--format",
        choices=("requirements", "pylock"),
        default="requirements",
        help="requirements: a hashed requirements file (uv pip sync, pip install --no-deps -r, "
        "install --lock); pylock: PEP 751 pylock.toml (--out pylock.NAME.toml)",
    )
    p.add_argument("--json", action="store_true", help="describe the written lock")
    add_recipe_flags(p)
    add_plan_flags(p)
    p.set_defaults(run=run)


def request_from(args: argparse.Namespace) -> LockRequest:
    """The lock flags as a LockRequest."""
    return LockRequest(
        plan=plan_inputs(args),
        extensions=extension_requests(args),
        wheel_sources=wheel_sources(args),
        user=user_packages(args),
        format=args.format,
    )


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Resolve the planned row for its Python and platform; --out FILE, else stdout."""
    progress = Progress(quiet=args.quiet)
    to_stdout = args.out is None or str(args.out) == "-"
    if to_stdout and args.json:
        raise BadInputError("--json describes a written lock: give --out FILE")
    path = None if to_stdout else Path(args.out)
    made = lock_to(request_from(args), path, env, progress)
    if path is None:
        out.write(made.text)
    elif args.json:
        summary = {
            "out": str(path),
            "format": args.format,
            "sha256": made.sha256,
            "row": made.plan.row.id,
            "python": made.plan.python,
            "distributions": made.pins,
        }
        out.write(envelope("lock", summary))
    return 0

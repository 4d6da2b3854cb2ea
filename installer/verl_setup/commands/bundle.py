"""`verl-setup bundle`: a lock (planned here, or --lock FILE) and its every file, for `install --offline`."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import extension_requests, plan_inputs, user_packages, wheel_sources
from verl_setup.commands.flags import add_plan_flags, add_recipe_flags
from verl_setup.environment.lock_job import LockRequest
from verl_setup.errors import VerlSetupError
from verl_setup.output import Progress, emit, envelope


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The bundle flags."""
    p.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="the bundle folder (replaced whole)"
    )
    p.add_argument(
        "--lock", type=Path, metavar="FILE", help="bundle this lock (default: lock the planned row)"
    )
    p.add_argument(
        "--no-python", action="store_true", help="leave the Python build out (the target provides the Python)"
    )
    p.add_argument("--wait", type=float, default=600.0, metavar="S", help="wait for another run on DIR (600)")
    p.add_argument("--json", action="store_true", help="machine-readable result")
    add_recipe_flags(p)
    add_plan_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Make the lock (or read --lock), then gather its files into --out DIR."""
    from verl_setup.environment.bundle_job import BundleRequest, bundle  # noqa: PLC0415

    progress = Progress(quiet=args.quiet)
    request = BundleRequest(
        lock=LockRequest(
            plan=plan_inputs(args),
            extensions=extension_requests(args),
            wheel_sources=wheel_sources(args),
            user=user_packages(args),
        ),
        lock_file=args.lock,
        out=args.out,
        python_build=not args.no_python,
        wait_s=args.wait,
    )
    try:
        result = bundle(request, env, progress)
    except VerlSetupError as exc:
        if args.json:
            emit(out, "bundle", {"seconds": progress.elapsed(), "steps": progress.steps}, exc)
        raise
    if args.json:
        out.write(envelope("bundle", {**result, "seconds": progress.elapsed()}))
    return 0

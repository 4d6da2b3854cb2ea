"""`verl-setup install`: flags -> InstallOptions, run it, print the result (also on failure)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TextIO

from verl_setup.commands.common import extension_requests, plan_inputs, wheel_sources
from verl_setup.environment.install import InstallOptions, install
from verl_setup.errors import VerlSetupError
from verl_setup.output import Progress, envelope


def options_from_args(args: argparse.Namespace) -> InstallOptions:
    """The install flags as InstallOptions."""
    return InstallOptions(
        plan=plan_inputs(args),
        prefix=args.prefix,
        lock=args.lock,
        extensions=extension_requests(args),
        wheel_sources=wheel_sources(args),
        python_downloads=not args.no_python_downloads,
        wait_s=args.wait,
        import_timeout=None if args.no_import else args.import_timeout,
    )


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Install; with --json a result object on stdout, on failure too (then the error, exit code)."""
    progress = Progress(quiet=args.quiet)
    try:
        result = install(options_from_args(args), env, progress, dry_run=args.dry_run, out=out)
    except VerlSetupError as exc:
        if args.json:
            failure = {"ok": False, "error": str(exc), "exit_code": exc.exit_code}
            out.write(envelope({**failure, "seconds": progress.elapsed(), "steps": progress.steps}))
        raise
    if args.json and result is not None:
        out.write(envelope(result))
    return 0

"""`verl-setup install`: flags -> InstallOptions, run it, print the result (also on failure)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import (
    config_of,
    extension_requests,
    plan_inputs,
    user_packages,
    wheel_sources,
)
from verl_setup.commands.flags import add_plan_flags, add_recipe_flags
from verl_setup.environment.install import install
from verl_setup.environment.install_job import InstallOptions
from verl_setup.errors import BadInputError, VerlSetupError
from verl_setup.output import Progress, emit, envelope


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The install flags."""
    p.add_argument("--prefix", type=Path, metavar="PATH", help="default: the team config's, else .venv")
    p.add_argument("--lock", type=Path, metavar="FILE", help="install exactly this lock (hashes enforced)")
    p.add_argument(
        "--offline", type=Path, metavar="DIR",
        help="install a bundle's lock with no network (`verl-setup bundle --out DIR`; its sha256s checked)",
    )  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="print the exact uv commands, change nothing")
    p.add_argument("--json", action="store_true", help="machine-readable result")
    p.add_argument(
        "--no-python-downloads", action="store_true",
        help="never let uv download the exact Python (then the same minor found here, with a warning)",
    )  # fmt: skip
    p.add_argument("--wait", type=float, default=600.0, metavar="S", help="wait for another install (600)")
    p.add_argument("--no-import", action="store_true", help="skip the import probe")
    p.add_argument(
        "--upgrade",
        "--refresh",
        action="store_true",
        help="resolve the row anew within its pins instead of its recorded closure: lists what moves "
        "(versions, upload dates) before installing; the environment is then unproven",
    )
    p.add_argument(
        "--import-timeout", type=float, default=900.0, metavar="S", help="for the import probe (900)"
    )
    g = p.add_argument_group("every node of a cluster (a prefix path the same on each node)")
    g.add_argument("--cluster", type=Path, metavar="FILE", help="install the cluster plan's row on its nodes")
    g.add_argument("--ray", metavar="ADDRESS", help="the Ray head (default: the cluster file's)")
    g.add_argument("--ray-python", metavar="EXE", help="interpreter with the cluster's ray (default .venv)")
    g.add_argument(
        "--installed", action="store_true",
        help="run each node's own verl-setup from PATH (default: ship this package as py_modules)",
    )  # fmt: skip
    g.add_argument("--timeout", type=float, default=3600.0, metavar="S", help="per node (3600)")
    add_recipe_flags(p)
    add_plan_flags(p)
    p.set_defaults(run=run)


def options_from_args(args: argparse.Namespace) -> InstallOptions:
    """The install flags as InstallOptions."""
    return InstallOptions(
        plan=plan_inputs(args),
        prefix=args.prefix or Path(config_of(args).get("config", {}).get("prefix", ".venv")),
        lock=args.lock,
        extensions=extension_requests(args),
        wheel_sources=wheel_sources(args),
        user=user_packages(args),
        python_downloads=not args.no_python_downloads,
        wait_s=args.wait,
        import_timeout=None if args.no_import else args.import_timeout,
        offline=args.offline,
        upgrade=args.upgrade,
    )


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Install; with --json a result object on stdout, on failure too (then the error, exit code)."""
    if args.offline is not None and (args.lock is not None or args.cluster is not None):
        raise BadInputError(
            "--offline DIR installs the bundle's own lock, on this machine: drop --lock/--cluster"
        )
    if args.cluster is not None:
        from verl_setup.commands import install_cluster  # noqa: PLC0415

        return install_cluster.run(args, env, out)
    progress = Progress(quiet=args.quiet)
    try:
        result = install(
            options_from_args(args), env, progress, dry_run=args.dry_run, out=out, as_json=args.json
        )
    except VerlSetupError as exc:
        if args.json:
            emit(out, "install", {"seconds": progress.elapsed(), "steps": progress.steps}, exc)
        raise
    if args.json and result is not None:
        out.write(envelope("install", result))
    elif result is not None and not args.quiet:
        from verl_setup.environment.next_steps import after_install  # noqa: PLC0415

        sys.stderr.write("".join(f"{line}\n" for line in after_install(Path(result["manifest"]["prefix"]))))
    return 0

"""`install --cluster FILE [--ray ADDRESS]`: flags -> ClusterInstallRequest -> cluster.install_all
.install_cluster (the cluster plan's row on every node, then verify there) -> print."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TextIO

from verl_setup.cluster.install import Reach
from verl_setup.cluster.install_all import ClusterInstallRequest, install_cluster
from verl_setup.commands.common import plan_inputs
from verl_setup.environment.verify import target_python
from verl_setup.errors import BadInputError
from verl_setup.output import Progress, emit


def node_options(args: argparse.Namespace) -> list[str]:
    """This run's install options, which each node's `verl-setup install` gets too."""
    argv = ["--wait", f"{args.wait:g}", "--import-timeout", f"{args.import_timeout:g}"]
    argv += [f"--build={n}" for n in args.build] + [f"--without={n}" for n in args.without]
    flags = ("build_flash_attn", "no_python_downloads", "no_import")
    argv += [f"--{flag.replace('_', '-')}" for flag in flags if getattr(args, flag)]
    return argv


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Install on every node (or once, on a shared prefix); exit 4 naming each node that failed,
    5 each that failed verify (with --json, in the one envelope)."""
    if args.lock is not None or args.dry_run:
        raise BadInputError(
            "--cluster installs the cluster plan's row on every node; --lock, --dry-run: one machine"
        )
    if not args.prefix.is_absolute():
        raise BadInputError(
            f"--prefix {args.prefix} must be absolute with --cluster: the same path on every node"
        )
    reach: Reach = "installed" if args.installed else "py_modules"
    request = ClusterInstallRequest(
        inputs=plan_inputs(args),
        cluster_file=args.cluster,
        python=target_python(None, args.ray_python, env),
        ray=args.ray,
        prefix=args.prefix,
        node_options=tuple(node_options(args)),
        reach=reach,
        timeout=args.timeout,
        live=not args.quiet,
    )
    report = install_cluster(request, env, Progress(quiet=args.quiet))
    error = report.error()
    if args.json:
        emit(out, "install", report.to_json(), error)
    if error is not None:
        raise error
    return 0

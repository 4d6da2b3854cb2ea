"""`install --cluster FILE [--ray ADDRESS]`: the cluster plan's row on every node, then verify --ray."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from verl_setup.cluster.detect import runtime_env_for, shipped_package
from verl_setup.cluster.install import (
    NodeResult,
    Reach,
    Sharing,
    check_sharing,
    install_on_nodes,
)
from verl_setup.commands.plan_cluster import cluster_plan
from verl_setup.environment.verify import target_python
from verl_setup.errors import BadInputError, CheckFailedError, InstallError
from verl_setup.output import Progress, envelope


def node_argv(args: argparse.Namespace, prefix: Path, row: str, python: str) -> list[str]:
    """The `verl-setup install` each node runs: the cluster's row and exact Python, this run's options."""
    argv = ["install", "--prefix", str(prefix), "--row", row, "--python", python, "--json", "--quiet"]
    argv += ["--wait", f"{args.wait:g}", "--import-timeout", f"{args.import_timeout:g}"]
    argv += [f"--build={n}" for n in args.build] + [f"--without={n}" for n in args.without]
    flags = ("build_flash_attn", "no_python_downloads", "no_import")
    argv += [f"--{flag.replace('_', '-')}" for flag in flags if getattr(args, flag)]
    return argv


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Install on every node (or once, on a shared prefix); exit 4 naming each node that failed."""
    if args.lock is not None or args.dry_run:
        raise BadInputError(
            "--cluster installs the cluster plan's row on every node; --lock, --dry-run: one machine"
        )
    if not args.prefix.is_absolute():
        raise BadInputError(
            f"--prefix {args.prefix} must be absolute with --cluster: the same path on every node"
        )
    plan = cluster_plan(args, env)
    address = args.ray or plan.cluster.address
    if not address:
        raise BadInputError("the cluster file was not gathered through Ray: give --ray ADDRESS")
    python = target_python(None, args.ray_python, env)
    reach: Reach = "installed" if args.installed else "py_modules"
    progress = Progress(quiet=args.quiet)
    row, total = plan.plan.row.id, len(plan.nodes)
    progress.step("plan", f"{row} with Python {plan.plan.python} for all {total} nodes of {args.cluster}")
    progress.step("filesystem", f"is {args.prefix.parent} the same folder on every node?")
    sharing = check_sharing(python, address, args.prefix.parent, env=env, timeout=120)
    progress.say(f"{args.prefix.parent}: {sharing.words()}")
    where = "once, on the head node (shared prefix)" if sharing.shared else "on every node in parallel"
    progress.step("install", f"{args.prefix} {where}; one line per node as it finishes")
    progress.end_line()
    with shipped_package() as package:
        runtime_env = runtime_env_for(package if reach == "py_modules" else None, None)
        results = install_on_nodes(
            python,
            address,
            node_argv(args, args.prefix, row, plan.plan.python),
            only=("head",) if sharing.shared else (),
            env=env,
            timeout=args.timeout,
            reach=reach,
            runtime_env=runtime_env,
            live=not args.quiet,
        )
        for r in results:
            progress.say(
                f"node {r.label}: " + (f"installed in {r.seconds:g}s" if r.ok else f"failed: {r.error}")
            )
        good = [r for r in results if r.ok]
        verified: dict[str, Any] | None = None
        verify_error = None
        if good:
            # `verify --prefix` on each node, in a child of its own: a Ray worker started with the
            # env's py_executable also sees the raylet's site-packages (found as duplicates).
            progress.step(
                "verify", "verify --prefix on " + ("every node" if sharing.shared else "each installed node")
            )
            checked = install_on_nodes(
                python,
                address,
                ["verify", "--prefix", str(args.prefix), "--json", "--no-import"],
                only=() if sharing.shared else tuple(r.node_id for r in good),
                env=env,
                timeout=600,
                reach=reach,
                runtime_env=runtime_env,
                live=not args.quiet,
            )
            for r in checked:
                progress.say(f"node {r.label}: " + ("verified" if r.ok else f"verify failed: {r.error}"))
            bad = [r for r in checked if not r.ok]
            verified = {"ok": not bad and bool(checked), "nodes": [r.to_json() for r in checked]}
            if bad:
                verify_error = _failure(bad, len(checked)).replace("install failed", "verify failed")
    failed = [r for r in results if not r.ok]
    if args.json:
        out.write(
            envelope(
                "install",
                _json(
                    row,
                    python=plan.plan.python,
                    prefix=args.prefix,
                    sharing=sharing,
                    results=results,
                    verified=verified,
                ),
            )
        )
    if failed:
        raise InstallError(_failure(failed, len(results)))
    if verify_error:
        raise CheckFailedError(verify_error)
    return 0


def _failure(failed: list[NodeResult], total: int) -> str:
    lines = [f"install failed on {len(failed)} of {total} nodes (the others keep their result):"]
    lines += [f"  node {r.label}: {r.error}" for r in failed]
    return "\n".join(lines)


def _json(
    row: str,
    *,
    python: str,
    prefix: Path,
    sharing: Sharing,
    results: list[NodeResult],
    verified: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "ok": all(r.ok for r in results) and bool(verified and verified.get("ok")),
        "row": row,
        "python": python,
        "prefix": str(prefix),
        "filesystem": sharing.to_json(),
        "nodes": [r.to_json() for r in results],
        "verify": verified,
    }

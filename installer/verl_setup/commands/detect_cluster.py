"""`detect --ray ADDRESS` / `detect --slurm`: every node's facts as a cluster file (stdout or --out;
with --json, stdout is the envelope whose data is the cluster file, which --cluster reads too)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.cluster.detect import detect_cluster, load_runtime_env
from verl_setup.cluster.slurm import detect_slurm
from verl_setup.environment.verify import target_python
from verl_setup.errors import BadInputError
from verl_setup.host.cluster_file import Cluster, save_cluster
from verl_setup.output import envelope


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Gather the cluster file; a node that gave no facts is in it as missing, and named on stderr."""
    if args.out is not None and args.out.exists() and not args.force:
        raise BadInputError(f"{args.out} exists (give --force to overwrite it)")
    if args.slurm and args.ray is not None:
        raise BadInputError("--ray and --slurm: gather through one of them")
    if args.slurm:
        write(detect_slurm(env, timeout=args.timeout), args.out, out, as_json=args.json, quiet=args.quiet)
        return 0
    python = target_python(args.prefix, args.python, env)
    rendered = load_runtime_env(args.runtime_env) if args.runtime_env else None
    cluster = detect_cluster(
        python,
        args.ray,
        reach="installed" if args.installed else "py_modules",
        timeout=args.timeout,
        env=env,
        rendered=rendered,
    )
    write(cluster, args.out, out, as_json=args.json, quiet=args.quiet)
    return 0


def write(
    cluster: Cluster, path: Path | None, out: TextIO, *, as_json: bool = False, quiet: bool = False
) -> None:
    """The cluster file to `path` (written whole, then renamed) or `out` (as the envelope's data
    with --json, written to stdout even with --out); the summary to stderr (not under -q; a
    missing node's warning always)."""
    text = cluster.to_json() if path is None else save_cluster(cluster, path)
    if as_json:
        out.write(envelope("detect", json.loads(text)))
    elif path is None:
        out.write(text)
    if not quiet:
        sys.stderr.write(
            f"verl-setup: {len(cluster.nodes)} node(s) answered through {cluster.how}"
            f"{f' ({cluster.tool})' if cluster.tool else ''}, {len(cluster.missing)} missing\n"
        )
    for m in cluster.missing:
        sys.stderr.write(
            f"verl-setup: warning: node {m.name} ({m.ip or 'no address'}) gave no facts: {m.reason}\n"
        )

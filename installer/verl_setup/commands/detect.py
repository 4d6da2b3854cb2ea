"""`verl-setup detect`: describe this host, as text or as versioned JSON."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.text_output import host_text
from verl_setup.errors import BadInputError
from verl_setup.host.detect import detect
from verl_setup.output import envelope


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The detect flags."""
    p.add_argument("--json", action="store_true", help="machine-readable HostFacts (a host file for --host)")
    g = p.add_argument_group("every node of a cluster, as a cluster file (plan/install --cluster)")
    g.add_argument("--ray", metavar="ADDRESS", help="one detection task pinned to each alive Ray node")
    g.add_argument("--slurm", action="store_true", help="one srun task per node of this allocation")
    g.add_argument("--out", type=Path, metavar="FILE", help="write the cluster file here (default stdout)")
    g.add_argument("--force", action="store_true", help="overwrite --out")
    g.add_argument("--prefix", type=Path, metavar="PATH", help="env whose Python has ray (default .venv)")
    g.add_argument("--python", metavar="EXE", help="interpreter with ray, as the cluster's")
    g.add_argument("--runtime-env", type=Path, metavar="FILE", help="a rendered runtime_env.yaml")
    g.add_argument(
        "--installed", action="store_true",
        help="run each node's own verl-setup from PATH (default: ship this package as py_modules)",
    )  # fmt: skip
    g.add_argument("--timeout", type=float, default=120.0, metavar="S", help="hard limit (120)")
    p.set_defaults(run=run)


_CLUSTER_FLAGS: dict[str, Callable[[argparse.Namespace], bool]] = {
    "--out": lambda a: a.out is not None,
    "--force": lambda a: bool(a.force),
    "--prefix": lambda a: a.prefix is not None,
    "--python": lambda a: a.python is not None,
    "--runtime-env": lambda a: a.runtime_env is not None,
    "--installed": lambda a: bool(a.installed),
    "--timeout": lambda a: a.timeout != 120.0,
}


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Detect and print (every node of a cluster with --ray or --slurm)."""
    if args.ray is not None or args.slurm:
        from verl_setup.commands import detect_cluster  # noqa: PLC0415  # Ray/Slurm code only when asked

        return detect_cluster.run(args, env, out)
    cluster_only = [f for f, given in _CLUSTER_FLAGS.items() if given(args)]
    if cluster_only:  # M2: they were silently ignored (exit 0, no file written)
        raise BadInputError(
            f"{', '.join(cluster_only)} only go with --ray or --slurm (a cluster file); "
            "for this host's file, redirect: verl-setup detect --json > FILE"
        )
    facts = detect()
    out.write(envelope("detect", dataclasses.asdict(facts)) if args.json else host_text(facts))
    return 0

"""`verl-setup plan`: select the matrix row for a machine and say why, as text or JSON."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import plan_for
from verl_setup.commands.flags import add_plan_flags
from verl_setup.commands.reports import plan_text
from verl_setup.output import envelope


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The plan flags."""
    p.add_argument("--json", action="store_true", help="machine-readable plan (schema 1)")
    p.add_argument("--explain", action="store_true", help="show evidence and every rejected row")
    p.add_argument(
        "--cluster", type=Path, metavar="FILE", help="one row for every node of a cluster file (detect --ray)"
    )
    add_plan_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Plan and print (one row for every node with --cluster)."""
    if args.cluster is not None:
        from verl_setup.commands import plan_cluster  # noqa: PLC0415

        return plan_cluster.run(args, env, out)
    plan = plan_for(args, env)
    out.write(envelope(plan.to_json()) if args.json else plan_text(plan, explain=args.explain))
    return 0

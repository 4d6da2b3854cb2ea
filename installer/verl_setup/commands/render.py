"""`verl-setup render`: flags -> RenderOptions and RenderRequest -> deliver.render_job.render_into
(render, `uv lock` for the uv project, compare, write unless told not to) -> report each file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import plan_inputs, render_options
from verl_setup.commands.flags import add_artifact_flags, add_plan_flags
from verl_setup.deliver.render_job import RenderRequest, render_into
from verl_setup.output import Progress, emit
from verl_setup.util.vocab import RENDER_TARGETS


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The render flags: targets, where, and the artifact and plan flags."""
    p.add_argument("targets", nargs="+", metavar="TARGET", help=f"{', '.join(RENDER_TARGETS)} or all")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder to write into")
    p.add_argument("--dry-run", action="store_true", help="show what would be written, write nothing")
    p.add_argument("--force", action="store_true", help="overwrite files that differ (hand edits are lost)")
    p.add_argument("--json", action="store_true", help="machine-readable list of files and their status")
    p.add_argument(
        "--cluster", type=Path, metavar="FILE",
        help="plan for every node of a cluster file; its nodes, GPUs, head and interfaces shape the files",
    )  # fmt: skip
    add_artifact_flags(p)
    add_plan_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Plan (for one machine, or every node of --cluster) and render; refuse to clobber a changed
    file without --force (exit 2, naming it)."""
    request = RenderRequest(
        inputs=plan_inputs(args),
        cluster=args.cluster,
        options=render_options(args, env, args.targets),
        out=args.out,
        dry_run=args.dry_run,
        force=args.force,
    )
    quiet = getattr(args, "quiet", False)
    # what plan warns about holds for the files too (-q keeps warnings)
    warn = None if args.json else _warn
    report = render_into(request, env, Progress(quiet=quiet), warn=warn, cluster_warn=_warn)
    error = report.error()
    if args.json:
        emit(out, "render", report.to_json(), error)
    else:
        for f in report.files:
            out.write(f"{f.status:<10} {args.out / f.name}\n")
            if args.dry_run and f.status != "unchanged":
                out.write("".join(f"    | {line}\n" for line in f.content.splitlines()))
    if error is not None:
        raise error
    if report.written and not args.json and not quiet and report.plan and report.options:
        from verl_setup.render.next_steps import after_render  # noqa: PLC0415

        out.flush()  # the file list first, then what to type
        steps = after_render(report.options.targets, args.out, report.plan, report.options)
        sys.stderr.write("".join(f"{x}\n" for x in steps))
    return 0


def _warn(warning: str) -> None:
    sys.stderr.write(f"verl-setup: warning: {warning}\n")

"""`verl-setup docker build`: flags -> ImageRequest -> image.build.build_image -> print (or, with
--print-context, the context's listing)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import plan_inputs, render_options
from verl_setup.commands.flags import add_artifact_flags, add_plan_flags
from verl_setup.image.build import ImageReport, ImageRequest, build_image, context_listing
from verl_setup.image.buildkit import BUILDERS
from verl_setup.output import envelope


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`docker build` and its flags."""
    dsub = p.add_subparsers(dest="docker_cmd", required=True, metavar="build")
    b = dsub.add_parser("build", help="render, build (BuildKit where it exists), verify inside, label")
    b.add_argument("--tag", metavar="TAG", help="image tag (required unless --print-context)")
    b.add_argument(
        "--out", type=Path, metavar="DIR", help="keep the build context here (default: a temp dir)"
    )
    b.add_argument("--push", action="store_true", help="push the verified image")
    b.add_argument("--force", action="store_true", help="overwrite changed files in --out")
    b.add_argument("--network", metavar="MODE", help="network mode for RUN steps (e.g. host)")
    b.add_argument(
        "--builder", choices=BUILDERS, default="auto",
        help="auto (default): docker buildx, else DOCKER_BUILDKIT=1 docker build, else the legacy builder",
    )  # fmt: skip
    b.add_argument("--print-context", action="store_true", help="list what would be sent, build nothing")
    b.add_argument("--json", action="store_true", help="machine-readable result")
    add_artifact_flags(b)
    add_plan_flags(b)
    b.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """The whole command: context, build, verify, label, optionally push."""
    request = ImageRequest(
        inputs=plan_inputs(args),
        options=render_options(args, env, ["docker"]),
        tag=args.tag,
        builder=args.builder,
        context=args.out,
        force=args.force,
        network=args.network,
        push=args.push,
        quiet=args.quiet,
    )
    if args.print_context:
        listing = context_listing(request, env)
        entries, total = listing.entries, listing.total_bytes
        if args.json:
            out.write(
                envelope("docker build", {"files": [e.__dict__ for e in entries], "total_bytes": total})
            )
        else:
            out.writelines(f"{e.size:>10}  {e.name}\n" for e in entries)
            out.write(f"{total:>10}  bytes in {len(entries)} files (no .git, no caches, no weights)\n")
        return 0
    report = build_image(request, env, sys.stderr)
    if args.json:
        out.write(envelope("docker build", report.as_dict()))
    else:
        out.write(_text(report))
    return 0


def _text(report: ImageReport) -> str:
    return (
        f"built {report.tag} ({report.image[:19]}) for {report.row} in {report.seconds:.1f}s with "
        f"{report.builder}, {len(report.cached_steps)}/{report.steps} steps from cache; "
        f"pins verified (Python {report.python})\n"
    )

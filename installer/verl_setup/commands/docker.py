"""`verl-setup docker build`: render the docker target into a build context, build, verify, label."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import plan_for
from verl_setup.commands.flags import add_artifact_flags, add_plan_flags
from verl_setup.commands.render import options_from_args
from verl_setup.environment.image import (
    build,
    client,
    describe_context,
    label_verified,
    push,
    verify_in_image,
)
from verl_setup.errors import BadInputError, CheckFailedError
from verl_setup.output import envelope
from verl_setup.plan.recipe import build_recipe
from verl_setup.plan.select import Plan
from verl_setup.render.templates import RenderedFile, RenderOptions, compare, render, write


def add_arguments(p: argparse.ArgumentParser) -> None:
    """`docker build` and its flags."""
    dsub = p.add_subparsers(dest="docker_cmd", required=True, metavar="build")
    b = dsub.add_parser("build", help="render, build through the Docker SDK, verify inside, label")
    b.add_argument("--tag", metavar="TAG", help="image tag (required unless --print-context)")
    b.add_argument(
        "--out", type=Path, metavar="DIR", help="keep the build context here (default: a temp dir)"
    )
    b.add_argument("--push", action="store_true", help="push the verified image")
    b.add_argument("--force", action="store_true", help="overwrite changed files in --out")
    b.add_argument("--network", metavar="MODE", help="network mode for RUN steps (e.g. host)")
    b.add_argument("--print-context", action="store_true", help="list what would be sent, build nothing")
    b.add_argument("--json", action="store_true", help="machine-readable result")
    add_artifact_flags(b)
    add_plan_flags(b)
    b.set_defaults(run=run)


def context_files(plan: Plan, options: RenderOptions) -> list[RenderedFile]:
    """The files of the build context: the docker target, nothing else."""
    return render(plan, dataclasses.replace(options, targets=("docker",)))


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """The whole command: context, build, verify, label, optionally push."""
    plan = plan_for(args, env)
    options = options_from_args(args)
    files = context_files(plan, options)
    if args.print_context:
        entries = describe_context(files)
        total = sum(e.size for e in entries)
        if args.json:
            out.write(envelope({"files": [e.__dict__ for e in entries], "total_bytes": total}))
        else:
            out.writelines(f"{e.size:>10}  {e.name}\n" for e in entries)
            out.write(f"{total:>10}  bytes in {len(entries)} files (no .git, no caches, no weights)\n")
        return 0
    if not args.tag:
        raise BadInputError("--tag is required to build")
    if options.buildkit:
        # The Docker SDK drives the classic builder, which rejects RUN --mount.
        raise BadInputError(
            "--buildkit Dockerfiles need BuildKit (`docker buildx build`); render one with "
            "`verl-setup render docker --buildkit`, or build without --buildkit here"
        )
    engine = client()
    with tempfile.TemporaryDirectory(prefix="verl-setup-ctx-") as tmp:
        context = args.out or Path(tmp)
        marked = compare(files, context, force=args.force)
        changed = [f.name for f in marked if f.status == "changed"]
        if changed:
            raise BadInputError(
                f"{', '.join(changed)} in {context} differ from what would be rendered; "
                "nothing was built. --force overwrites"
            )
        write(marked, context)
        sys.stderr.write(f"verl-setup: building {args.tag} from {context} (row {plan.row.id})\n")
        _, log, seconds = build(
            engine, context, args.tag, network=args.network, build_args={}, progress=sys.stderr
        )
    recipe = build_recipe(plan, extensions=options.extensions, nvcc_version=plan.row.torch.cuda)
    checked = verify_in_image(engine, args.tag, list(recipe.verify_pins))
    if checked["mismatches"]:
        raise CheckFailedError(f"{args.tag}: pins not satisfied inside the image: {checked['mismatches']}")
    label_verified(engine, args.tag, plan.row.id, checked["python"])
    image_id = str(engine.images.get(args.tag).id)  # the label step made a new image
    if args.push:
        push(engine, args.tag)
    report = {
        "tag": args.tag,
        "image": image_id,
        "row": plan.row.id,
        "seconds": round(seconds, 1),
        "steps": len(log.steps),
        "cached_steps": log.cached,
        "verified": True,
        "python": checked["python"],
    }
    if args.json:
        out.write(envelope(report))
    else:
        out.write(
            f"built {args.tag} ({image_id[:19]}) for {plan.row.id} in {seconds:.1f}s, "
            f"{len(log.cached)}/{len(log.steps)} steps from cache; "
            f"pins verified (Python {checked['python']})\n"
        )
    return 0

"""`verl-setup docker build`: render the docker target into a build context, build (BuildKit
where the docker CLI reaches it, else the legacy builder), verify, label."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from verl_setup.commands.common import plan_for
from verl_setup.commands.flags import add_artifact_flags, add_plan_flags
from verl_setup.commands.render import options_from_args
from verl_setup.environment.lock_job import user_recipe
from verl_setup.errors import BadInputError, CheckFailedError
from verl_setup.image.buildkit import BUILDERS, ImageBuilder, build_cli, choose
from verl_setup.image.engine import (
    BuildLog,
    build,
    client,
    describe_context,
    label_verified,
    push,
    verify_in_image,
)
from verl_setup.output import envelope
from verl_setup.plan.recipe import build_recipe
from verl_setup.plan.select import Plan
from verl_setup.render.templates import RenderedFile, RenderOptions, compare, render, write


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


def context_files(plan: Plan, options: RenderOptions) -> list[RenderedFile]:
    """The files of the build context: the docker target, nothing else."""
    return render(plan, dataclasses.replace(options, targets=("docker",)))


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """The whole command: context, build, verify, label, optionally push."""
    plan = plan_for(args, env)
    options = options_from_args(args, env)
    files = context_files(plan, options)
    if args.print_context:
        entries = describe_context(files)
        total = sum(e.size for e in entries)
        if args.json:
            out.write(
                envelope("docker build", {"files": [e.__dict__ for e in entries], "total_bytes": total})
            )
        else:
            out.writelines(f"{e.size:>10}  {e.name}\n" for e in entries)
            out.write(f"{total:>10}  bytes in {len(entries)} files (no .git, no caches, no weights)\n")
        return 0
    if not args.tag:
        raise BadInputError("--tag is required to build")
    builder = pick_builder(args.builder, env, buildkit_only=options.buildkit)
    engine = client()
    if builder.kind == "legacy" and args.builder == "auto":
        sys.stderr.write(
            f"verl-setup: BuildKit is out of reach ({builder.why}); building with Docker's legacy builder\n"
        )
    elif not args.quiet:
        sys.stderr.write(f"verl-setup: building with {builder.kind} ({builder.why})\n")
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
        _, log, seconds = _build(builder, engine, context, args, env)
    recipe = build_recipe(
        plan,
        extensions=options.extensions,
        nvcc_version=plan.row.torch.cuda,
        wheel_sources=options.wheel_sources,
        env=env,
        missing="build",
    )
    recipe = user_recipe(plan, recipe, options.user)  # a verl of the user's is not the row's pin
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
        "builder": builder.kind,
        "builder_why": builder.why,
    }
    if args.json:
        out.write(envelope("docker build", report))
    else:
        out.write(
            f"built {args.tag} ({image_id[:19]}) for {plan.row.id} in {seconds:.1f}s with {builder.kind}, "
            f"{len(log.cached)}/{len(log.steps)} steps from cache; "
            f"pins verified (Python {checked['python']})\n"
        )
    return 0


def pick_builder(want: str, env: Mapping[str, str], *, buildkit_only: bool) -> ImageBuilder:
    """The builder for this build; a BuildKit-only Dockerfile (--buildkit: RUN --mount) is refused
    on the legacy builder, which cannot run it, before anything is built."""
    if want == "legacy":
        builder = ImageBuilder(kind="legacy", docker=None, why="--builder legacy")
    else:
        builder = choose(env)
        if want not in ("auto", builder.kind):
            raise BadInputError(f"--builder {want}: not available here ({builder.why})")
    if builder.kind == "legacy" and buildkit_only:
        raise BadInputError(
            f"--buildkit Dockerfiles (RUN --mount) need BuildKit, out of reach here ({builder.why}): "
            "install Docker's buildx plugin, or build without --buildkit"
        )
    return builder


def _build(
    builder: ImageBuilder, engine: Any, context: Path, args: argparse.Namespace, env: Mapping[str, str]
) -> tuple[str, BuildLog, float]:
    """The build itself, its log lines on stderr unless --quiet."""
    quiet = Path(os.devnull).open("w", encoding="utf-8") if args.quiet else None  # noqa: SIM115
    sink = quiet or contextlib.nullcontext(sys.stderr)
    with sink as progress:
        if builder.kind == "legacy":
            return build(engine, context, args.tag, network=args.network, build_args={}, progress=progress)
        return build_cli(builder, context, args.tag, network=args.network, env=env, progress=progress)

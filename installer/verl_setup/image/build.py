"""`docker build`'s use case: render the docker target into a build context, pick the builder
(BuildKit where the docker CLI reaches it, else the legacy builder), build, verify the row's pins
inside the image, label it, push. It prints nothing but progress, on the stream it is given."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from verl_setup.environment.lock_job import user_recipe
from verl_setup.errors import BadInputError, CheckFailedError
from verl_setup.image.buildkit import ImageBuilder, build_cli, choose
from verl_setup.image.engine import (
    BuildLog,
    ContextEntry,
    build,
    client,
    describe_context,
    label_verified,
    push,
    verify_in_image,
)
from verl_setup.plan.make import PlanInputs, make_plan
from verl_setup.plan.recipe import build_recipe
from verl_setup.plan.select import Plan
from verl_setup.render.templates import RenderedFile, RenderOptions, compare, render, write


@dataclass(frozen=True, kw_only=True)
class ImageRequest:
    """One image to build: the plan (or the plan flags to make it from) and render options, and
    how to build it."""

    options: RenderOptions
    tag: str | None  # required to build; checked after rendering, as the context may refuse first
    builder: str = "auto"  # buildkit.BUILDERS
    context: Path | None = None  # keep the build context here (default: a temp dir)
    force: bool = False  # overwrite changed files in `context`
    network: str | None = None  # network mode for RUN steps
    push: bool = False
    quiet: bool = False  # no build log (the builder line and the build line still come)
    plan: Plan | None = None
    inputs: PlanInputs | None = None

    def planned(self, env: Mapping[str, str]) -> Plan:
        """The request's plan, else the one its inputs make."""
        if self.plan is not None:
            return self.plan
        if self.inputs is None:
            raise ValueError("an ImageRequest needs a plan or the inputs to make one")
        return make_plan(self.inputs, env)


@dataclass(frozen=True, kw_only=True)
class ImageReport:
    """A built, verified, labelled image (the `docker build` result object, in its key order)."""

    tag: str
    image: str
    row: str
    seconds: float
    steps: int
    cached_steps: list[str]
    verified: bool
    python: str
    builder: str
    builder_why: str

    def as_dict(self) -> dict[str, Any]:
        """The result object of `docker build --json`."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class ContextListing:
    """What `docker build` would send, built nothing (--print-context)."""

    entries: list[ContextEntry]

    @property
    def total_bytes(self) -> int:
        """The context's size."""
        return sum(e.size for e in self.entries)


def context_files(plan: Plan, options: RenderOptions) -> list[RenderedFile]:
    """The files of the build context: the docker target, nothing else."""
    return render(plan, dataclasses.replace(options, targets=("docker",)))


def context_listing(request: ImageRequest, env: Mapping[str, str]) -> ContextListing:
    """The build context's files and sizes, for a look before building (--print-context)."""
    return ContextListing(entries=describe_context(context_files(request.planned(env), request.options)))


def build_image(request: ImageRequest, env: Mapping[str, str], progress: TextIO) -> ImageReport:
    """Render, build, verify inside, label, optionally push; refuses (before building) a changed
    file in `request.context` without `force` and a builder that is out of reach."""
    plan, options = request.planned(env), request.options
    files = context_files(plan, options)
    if not request.tag:
        raise BadInputError("--tag is required to build")
    tag = request.tag
    builder = pick_builder(request.builder, env, buildkit_only=options.buildkit)
    engine = client()
    if builder.kind == "legacy" and request.builder == "auto":
        progress.write(
            f"verl-setup: BuildKit is out of reach ({builder.why}); building with Docker's legacy builder\n"
        )
    elif not request.quiet:
        progress.write(f"verl-setup: building with {builder.kind} ({builder.why})\n")
    with tempfile.TemporaryDirectory(prefix="verl-setup-ctx-") as tmp:
        context = request.context or Path(tmp)
        marked = compare(files, context, force=request.force)
        changed = [f.name for f in marked if f.status == "changed"]
        if changed:
            raise BadInputError(
                f"{', '.join(changed)} in {context} differ from what would be rendered; "
                "nothing was built. --force overwrites"
            )
        write(marked, context)
        progress.write(f"verl-setup: building {tag} from {context} (row {plan.row.id})\n")
        _, log, seconds = _build(builder, engine, context, tag, request, env=env, progress=progress)
    recipe = build_recipe(
        plan,
        extensions=options.extensions,
        nvcc_version=plan.row.torch.cuda,
        wheel_sources=options.wheel_sources,
        env=env,
        missing="build",
    )
    recipe = user_recipe(plan, recipe, options.user)  # a verl of the user's is not the row's pin
    checked = verify_in_image(engine, tag, list(recipe.verify_pins))
    if checked["mismatches"]:
        raise CheckFailedError(f"{tag}: pins not satisfied inside the image: {checked['mismatches']}")
    label_verified(engine, tag, plan.row.id, checked["python"])
    image_id = str(engine.images.get(tag).id)  # the label step made a new image
    if request.push:
        push(engine, tag)
    return ImageReport(
        tag=tag,
        image=image_id,
        row=plan.row.id,
        seconds=round(seconds, 1),
        steps=len(log.steps),
        cached_steps=log.cached,
        verified=True,
        python=checked["python"],
        builder=builder.kind,
        builder_why=builder.why,
    )


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
    builder: ImageBuilder,
    engine: Any,
    context: Path,
    tag: str,
    request: ImageRequest,
    *,
    env: Mapping[str, str],
    progress: TextIO,
) -> tuple[str, BuildLog, float]:
    """The build itself, its log lines on `progress` unless quiet."""
    quiet = Path(os.devnull).open("w", encoding="utf-8") if request.quiet else None  # noqa: SIM115
    sink = quiet or contextlib.nullcontext(progress)
    with sink as log_to:
        if builder.kind == "legacy":
            return build(engine, context, tag, network=request.network, build_args={}, progress=log_to)
        return build_cli(builder, context, tag, network=request.network, env=env, progress=log_to)

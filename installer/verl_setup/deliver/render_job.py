"""`render`'s use case: render the targets, lock the uv project, compare with the folder, write.

render_into(request, env, progress) -> RenderReport: the plan (from the request's inputs, for
one machine or a cluster file), the files, their comparison with the folder. A file in the
folder that differs from what would be rendered (edited by hand?) is a conflict: nothing is
written without `force`, and the report's error() names it (exit 2). A dry run resolves
nothing and writes nothing.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from verl_setup.errors import BadInputError
from verl_setup.output import Progress
from verl_setup.plan.make import PlanInputs, make_plan
from verl_setup.plan.select import Plan
from verl_setup.render.templates import RenderedFile, RenderOptions, compare, render, write
from verl_setup.util.bounded import one_line


@dataclass(frozen=True, kw_only=True)
class RenderRequest:
    """What to render: the plan flags (for one machine, or every node of a cluster file), into
    which folder, and how."""

    inputs: PlanInputs
    options: RenderOptions
    out: Path
    cluster: Path | None = None
    dry_run: bool = False
    force: bool = False


@dataclass(frozen=True, kw_only=True)
class RenderReport:
    """Each file with its status (create, unchanged, changed, overwrite), and whether they were written."""

    out: Path
    row: str
    dry_run: bool
    files: tuple[RenderedFile, ...]
    written: bool
    plan: Plan | None = None  # what was rendered, for the next steps printed after it
    options: RenderOptions | None = None

    @property
    def conflicts(self) -> list[str]:
        return [f.name for f in self.files if f.status == "changed"]

    def error(self) -> BadInputError | None:
        """Files that differ from what would be rendered, outside a dry run: nothing was written."""
        if not self.conflicts or self.dry_run:
            return None
        return BadInputError(
            f"{', '.join(self.conflicts)} in {self.out} differ from what would be rendered "
            "(edited by hand?); nothing was written. --force overwrites, --dry-run shows the new text"
        )

    def to_json(self) -> dict[str, Any]:
        """The --json data (the envelope's)."""
        return {
            "out": str(self.out),
            "row": self.row,
            "dry_run": self.dry_run,
            "files": [{"name": f.name, "status": f.status} for f in self.files],
        }


def render_into(
    request: RenderRequest,
    env: Mapping[str, str],
    progress: Progress,
    *,
    warn: Callable[[str], None] | None = None,
    cluster_warn: Callable[[str], None] | None = None,
) -> RenderReport:
    """Plan, render, lock the uv project (not in a dry run), compare; write unless a file
    conflicts. `warn` hears what the plan warns about that holds for the files too (None: nobody
    asks); `cluster_warn` what the cluster file changes."""
    plan, options = _planned(request, env, cluster_warn)
    rendered = render(plan, options)
    if warn is not None:
        from verl_setup.render.next_steps import render_warnings  # noqa: PLC0415

        for warning in render_warnings(plan, options):
            warn(warning)
    if "uv-project" in options.targets:
        rendered += _uv_lock(request, plan, options, rendered, env=env, progress=progress)
    _usable_out(request.out)
    files = compare(rendered, request.out, force=request.force)
    report = RenderReport(
        out=request.out,
        row=plan.row.id,
        dry_run=request.dry_run,
        files=tuple(files),
        written=False,
        plan=plan,
        options=options,
    )
    if request.dry_run or report.error() is not None:
        return report
    write(files, request.out)
    return replace(report, written=True)


def _planned(
    request: RenderRequest, env: Mapping[str, str], cluster_warn: Callable[[str], None] | None
) -> tuple[Plan, RenderOptions]:
    """The plan the request's inputs make (with --cluster: the cluster plan, and the options its
    nodes, GPUs, head and interfaces shape)."""
    if request.cluster is None:
        return make_plan(request.inputs, env), request.options
    from verl_setup.plan.make import make_cluster_plan  # noqa: PLC0415  # the cluster file's classes
    from verl_setup.render.cluster_options import cluster_options  # noqa: PLC0415

    cluster_plan = make_cluster_plan(request.inputs, request.cluster, env)
    options, warnings = cluster_options(request.options, cluster_plan.cluster)
    for warning in warnings:
        if cluster_warn is not None:
            cluster_warn(warning)
    return cluster_plan.plan, options


def _usable_out(out: Path) -> None:
    """P2: --out that no file can be written under (a symlink loop) is named as such,
    not taken for files edited by hand."""
    try:
        out.stat()
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENAMETOOLONG):
            raise BadInputError(f"--out {one_line(str(out))}: {exc.strerror or exc}") from exc


def _uv_lock(
    request: RenderRequest,
    plan: Plan,
    options: RenderOptions,
    rendered: list[RenderedFile],
    *,
    env: Mapping[str, str],
    progress: Progress,
) -> list[RenderedFile]:
    """The uv project's uv.lock, made by `uv lock` (not in a dry run: that resolves nothing)."""
    from verl_setup.environment.uv_lock import lock  # noqa: PLC0415
    from verl_setup.render.templates import TARGETS, uv_project_of  # noqa: PLC0415

    for warning in uv_project_of(plan, options).warnings:
        progress.say(f"warning: {warning}")
    if request.dry_run:
        progress.say("uv.lock: not resolved in a dry run (`uv lock` runs when the files are written)")
        return []
    names = {name for _, name, _ in TARGETS["uv-project"]}
    project_files = {f.name: f.content for f in rendered if f.name in names}
    progress.step("uv lock", f"row {plan.row.id} for Python {plan.python} (the bundled uv resolves it)")
    text = lock(project_files, plan=plan, out=request.out, env=env, warn=progress.say)
    progress.step("done", "uv.lock resolved")
    return [RenderedFile(name="uv.lock", content=text, executable=False)]

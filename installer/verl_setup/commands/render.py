"""`verl-setup render`: options from arguments, render, report each file, write unless told not to."""

from __future__ import annotations

import argparse
import errno
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import extension_requests, pinned_user_packages, plan_for, wheel_sources
from verl_setup.commands.flags import add_artifact_flags, add_plan_flags
from verl_setup.errors import BadInputError
from verl_setup.output import Progress, emit
from verl_setup.plan.select import Plan
from verl_setup.render.templates import RenderedFile, RenderOptions, compare, expand_targets, render, write
from verl_setup.render.values import container_spec
from verl_setup.util.bounded import one_line
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
    """Plan (for one machine, or every node of --cluster), then render."""
    if args.cluster is None:
        return run_render(args, plan_for(args, env), out, env=env)
    from verl_setup.commands.plan_cluster import cluster_plan  # noqa: PLC0415
    from verl_setup.render.cluster_options import cluster_options  # noqa: PLC0415

    plan = cluster_plan(args, env)
    options, warnings = cluster_options(options_from_args(args, env), plan.cluster)
    for warning in warnings:
        sys.stderr.write(f"verl-setup: warning: {warning}\n")
    return run_render(args, plan.plan, out, options=options, env=env)


def options_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> RenderOptions:
    """RenderOptions from the render flags."""
    if args.nodes < 1:
        raise BadInputError(f"--nodes {args.nodes}: need at least 1")
    return RenderOptions(
        targets=expand_targets(getattr(args, "targets", ["docker"])),
        base_image=args.base_image,
        buildkit=args.buildkit,
        ca_bundle=args.ca_bundle,
        container=container_spec(args.container) if args.container else None,
        hf_home=args.hf_home,
        iface=args.iface,
        image=args.image,
        job=args.job,
        nodes=args.nodes,
        head_ip=args.head_ip,
        ray_port=args.ray_port,
        dashboard_port=args.dashboard_port,
        venv=args.venv,
        namespace=args.namespace,
        gpus_per_node=args.gpu_count,
        extensions=extension_requests(args),
        wheel_sources=wheel_sources(args),
        user=pinned_user_packages(args, env),
    )


def _usable_out(out: Path) -> None:
    """P2: --out that no file can be written under (a symlink loop) is named as such,
    not taken for files edited by hand."""
    try:
        out.stat()
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENAMETOOLONG):
            raise BadInputError(f"--out {one_line(str(out))}: {exc.strerror or exc}") from exc


def run_render(
    args: argparse.Namespace,
    plan: Plan,
    out: TextIO,
    *,
    options: RenderOptions | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """Render; refuse to clobber a changed file without --force (exit 2, naming it)."""
    options = options or options_from_args(args, env or {})
    rendered = render(plan, options)
    if not args.json:  # what plan warns about holds for the files too (-q keeps warnings)
        from verl_setup.render.next_steps import render_warnings  # noqa: PLC0415

        sys.stderr.write("".join(f"verl-setup: warning: {w}\n" for w in render_warnings(plan, options)))
    if "uv-project" in options.targets:
        rendered += _uv_lock(args, plan, options, rendered, env or {})
    _usable_out(args.out)
    files = compare(rendered, args.out, force=args.force)
    conflicts = [f.name for f in files if f.status == "changed"]
    error = None
    if conflicts and not args.dry_run:
        error = BadInputError(
            f"{', '.join(conflicts)} in {args.out} differ from what would be rendered "
            "(edited by hand?); nothing was written. --force overwrites, --dry-run shows the new text"
        )
    if args.json:
        report = {
            "out": str(args.out),
            "row": plan.row.id,
            "dry_run": args.dry_run,
            "files": [{"name": f.name, "status": f.status} for f in files],
        }
        emit(out, "render", report, error)
    else:
        for f in files:
            out.write(f"{f.status:<10} {args.out / f.name}\n")
            if args.dry_run and f.status != "unchanged":
                out.write("".join(f"    | {line}\n" for line in f.content.splitlines()))
    if error is not None:
        raise error
    if not args.dry_run:
        write(files, args.out)
        if not args.json and not getattr(args, "quiet", False):
            from verl_setup.render.next_steps import after_render  # noqa: PLC0415

            out.flush()  # the file list first, then what to type
            sys.stderr.write(
                "".join(f"{x}\n" for x in after_render(options.targets, args.out, plan, options))
            )
    return 0


def _uv_lock(
    args: argparse.Namespace,
    plan: Plan,
    options: RenderOptions,
    rendered: list[RenderedFile],
    env: Mapping[str, str],
) -> list[RenderedFile]:
    """The uv project's uv.lock, made by `uv lock` (not in a dry run: that resolves nothing)."""
    from verl_setup.environment.uv_lock import lock  # noqa: PLC0415
    from verl_setup.render.templates import TARGETS, uv_project_of  # noqa: PLC0415

    progress = Progress(quiet=getattr(args, "quiet", False))
    for warning in uv_project_of(plan, options).warnings:
        progress.say(f"warning: {warning}")
    if args.dry_run:
        progress.say("uv.lock: not resolved in a dry run (`uv lock` runs when the files are written)")
        return []
    names = {name for _, name, _ in TARGETS["uv-project"]}
    project_files = {f.name: f.content for f in rendered if f.name in names}
    progress.step("uv lock", f"row {plan.row.id} for Python {plan.python} (the bundled uv resolves it)")
    text = lock(project_files, plan=plan, out=args.out, env=env, warn=progress.say)
    progress.step("done", "uv.lock resolved")
    return [RenderedFile(name="uv.lock", content=text, executable=False)]

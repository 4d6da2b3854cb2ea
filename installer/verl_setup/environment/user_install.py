"""What install does with the user's packages (plan/user_packages.py): resolve them with the row
before anything changes, and record them (and the packages kept with --keep) in the manifest."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from verl_setup.environment.install_job import Job
from verl_setup.output import Progress


def resolve_user_packages(job: Job, progress: Progress) -> Job:
    """The user's packages resolved with the row in one uv resolve before anything changes: a
    conflict stops the install here (exit 4), with the prefix untouched and no staging left."""
    if job.lock is not None or not job.recipe.user.requirements:
        return job
    from verl_setup.environment.with_resolve import resolve_with_closure  # noqa: PLC0415

    resolved, pins = resolve_with_closure(job.plan, job.recipe, uv=job.uv, env=job.uv_env)
    shown = ", ".join(f"{r.requirement.name} {r.version or r.url}" for r in resolved)
    progress.step("with", f"resolved with row {job.plan.row.id}'s pins held: {shown}")
    held, relaxed = relax_closure(job.recipe.constraints, pins)
    for name, was, now in relaxed:
        progress.say(
            f"closure: {name} {was} -> {now}, relaxed for your packages (the row's own pins never move)"
        )
    recipe = dataclasses.replace(job.recipe, constraints=held)
    return dataclasses.replace(job, resolved=tuple(resolved), recipe=recipe)


def relax_closure(
    constraints: tuple[str, ...], pins: Mapping[str, str]
) -> tuple[tuple[str, ...], list[tuple[str, str, str]]]:
    """The closure's `name==version` lines with each pin the resolve with the user's packages
    moved replaced by the version it took, and those moves as (name, closure, taken)."""
    held, relaxed = [], []
    for line in constraints:
        name, _, version = line.partition("==")
        taken = pins.get(name)
        if taken is not None and taken != version:
            relaxed.append((name, version, taken))
            held.append(f"{name}=={taken}")
        else:
            held.append(line)
    return tuple(held), relaxed


def kept_record(job: Job) -> dict[str, str]:
    """--keep: name -> the version kept."""
    if not job.kept:
        return {}
    from verl_setup.environment.keep import version_of  # noqa: PLC0415

    return {name: version_of(info) for name, info in job.kept.items()}


def user_record(job: Job, installed: Mapping[str, str]) -> list[dict[str, Any]]:
    """The manifest's record of the user's packages: what was asked, from where, what got in."""
    from verl_setup.plan.verl_source import checkout_version  # noqa: PLC0415

    out = []
    if job.lock is not None and job.lock.fields.get("with"):  # the user's packages a lock carries
        from packaging.utils import canonicalize_name  # noqa: PLC0415

        for name in (canonicalize_name(n.strip()) for n in job.lock.fields["with"].split(",")):
            origin = f"lock {job.lock.path.name}"
            out.append({"name": name, "origin": origin, "installed": installed.get(name)})
    for req in job.recipe.user.requirements:
        item: dict[str, Any] = {**req.to_json(), "installed": installed.get(req.name)}
        if req.name == "verl" and req.path is not None:
            item["checkout_version"] = checkout_version(req.path)
            item["row_verl"] = job.plan.row.verl.version
        out.append(item)
    return out

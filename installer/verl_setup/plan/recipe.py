"""Plan -> Recipe: the one ordered install procedure, as typed steps, which `install` executes,
`render venv` prints as a shell script and `render docker` as a Dockerfile. Order: the venv with
the exact Python, then verl, torch (from its index), the engine and every pin in one resolve, each
held to the row's closure (its proven set, as uv constraints); then each package built against
torch (flash-attn, TransformerEngine's torch module, apex) in a step of its own (a prebuilt wheel,
a build on request, or left out); then the packages installed without their dependencies; then
verify. A new step is written here once."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from verl_setup.errors import BadInputError, InstallError
from verl_setup.host.nvcc import nvcc_version
from verl_setup.host.resources import memory_gib, online_cpus
from verl_setup.matrix.schema import ExtensionFacts, Row, WheelSource
from verl_setup.matrix.wheel_seen import load_seen
from verl_setup.plan.build_host import GIB_PER_BUILD_JOB, build_jobs
from verl_setup.plan.refusal import refusal, without_reason
from verl_setup.plan.select import Plan
from verl_setup.plan.steps import (
    TORCH_FAMILY,
    Choice,
    ExtensionPlan,
    ExtensionRequests,
    Missing,
    Recipe,
    Step,
)
from verl_setup.plan.wheel_sources import candidates, ordered_sources, user_sources
from verl_setup.plan.whole_wheel import in_place_of
from verl_setup.util.vocab import suggest


def build_recipe(
    plan: Plan,
    *,
    extensions: ExtensionRequests | None = None,
    flash_attn: Choice | None = None,
    nvcc_version: str | None = None,
    cores: int | None = None,
    memory_gib: float | None = None,
    wheel_sources: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
    missing: Missing = "refuse",
) -> Recipe:
    """The recipe for a plan; InstallError (before anything changes) when a package built against
    torch has no way in, BadInputError when --build/--without names a package the row lacks.
    `missing="build"` (an image) builds what no wheel source has instead of refusing."""
    row = plan.row
    facts = plan.matrix.rows_file.torch_extensions
    asked = dict(extensions or {})
    if flash_attn is not None:
        asked["flash-attn"] = flash_attn
    _check_names(asked, row, facts)
    reqs = row.requirements()
    torch_reqs = tuple(r for r in reqs if _name(r) in TORCH_FAMILY)
    verl_req = reqs[0]
    measured = _Measured(nvcc_version, cores, memory_gib)
    sources = _Sources(
        ordered_sources(plan.matrix.rows_file, user_sources(wheel_sources, env or {})), missing
    )
    plans = [
        _extension_plan(plan, name, ext, request=asked.get(name, "auto"), measured=measured, sources=sources)
        for name, ext in facts.items()
        if name in row.packages
    ]
    # A package left out takes its companions with it (a TransformerEngine without its torch
    # module breaks `import megatron.core`).
    dropped = {c for e in plans if e.mode == "without" for c in facts[e.name].companions}
    loose = (*row.no_deps, *row.sources)  # installed last, on their own (below)
    rest = tuple(r for r in reqs[1:] if _name(r) not in (*TORCH_FAMILY, *facts, *dropped, *loose))
    index, overrides = plan.index_url, bool(row.overrides)
    sdists = plan.matrix.rows_file.built_from_sdist(row)
    engine = "no engine" if row.engine.name == "none" else f"{row.engine.name} {row.engine.version}"
    # With every package below the pins held to the closure there is nothing left for a later step
    # to move: the engine and verl go in with torch in one resolve (in an image, after torch's layer).
    title = f"verl {row.verl.version}, torch {row.torch.version}, {engine} and every pin (one resolve)"
    reqs_all = (verl_req, *torch_reqs, *rest)
    torch_title = f"torch {row.torch.version}" + (f" (CUDA {row.torch.cuda})" if row.torch.cuda else "")
    steps = [
        # torch alone first, in an image only: its own layer, reused when any other pin moves.
        Step(
            name="torch",
            title=torch_title,
            requirements=torch_reqs,
            index_url=index,
            overrides=overrides,
            layer_only=True,
        ),
        Step(name="verl", title=title, requirements=reqs_all, index_url=index, overrides=overrides),
    ]
    warnings: list[str] = []
    for ext in plans:
        new_steps, warning = _extension_steps(ext, facts[ext.name], torch_reqs, index)
        steps += new_steps
        warnings += [warning] if warning else []
    skipped = tuple(n for n in row.sources if asked.get(n) == "without")
    if set(loose) - set(skipped):
        steps.append(_loose_step(row, skipped))
    warnings += [
        f"{n} left out (--without {n}): its source {row.sources[n]} is not installed" for n in skipped
    ]
    # A direct reference or a whole-project wheel is not the closure's to hold (its pin there is
    # the index's release of that name, not the file the row installs).
    closure, whole = plan.closure, tuple(e.distribution for e in plans if e.distribution)
    held, newer = closure.constraints((*row.sources, *facts, *whole)), closure.exclude_newer
    verify = [r for r in reqs if _name(r) not in (*facts, *dropped, *row.sources)]
    verify += [f"{e.name}=={e.version}" for e in plans if e.mode != "without" and not facts[e.name].build]
    recipe = Recipe(
        row=row,
        python=plan.python,
        overrides=row.overrides,
        steps=tuple(
            # torch's step holds nothing but torch: an image keeps its layer when the closure moves.
            replace(
                s,
                sdists=(*sdists, *s.sdists),
                constraints=bool(held) and s.name != "torch",
                exclude_newer=newer,
            )
            for s in steps
        ),
        constraints=held,
        closure=closure,
        extensions=tuple(plans),
        left_out_sources=skipped,
        verify_pins=tuple(verify),
        warnings=tuple(warnings),
        sdists=sdists,
    )
    return in_place_of(recipe, facts)


@dataclass(frozen=True)
class _Sources:
    """The wheel sources in order, and what to do when none has the wheel."""

    sources: list[WheelSource]
    missing: Missing


@dataclass(frozen=True)
class _Measured:
    """What a build needs to know about the machine (nvcc, cores, memory)."""

    nvcc_version: str | None
    cores: int | None
    memory_gib: float | None


def _loose_step(row: Row, skipped: tuple[str, ...]) -> Step:
    """The packages installed without their dependencies, or from a direct reference, last."""
    names = tuple(n for n in dict.fromkeys((*row.no_deps, *row.sources)) if n not in skipped)
    return Step(
        name="no-deps",
        title=f"{', '.join(names)} without their dependencies, as verl's own uv flow installs them",
        requirements=tuple(
            f"{n} @ {row.sources[n]}" if n in row.sources else f"{n}=={row.packages[n]}" for n in names
        ),
        no_deps=True,
        # A direct reference (a git URL) is a source tree: it is built on purpose, like the
        # packages built against torch, while every other package stays binary-only.
        sdists=tuple(n for n in names if n in row.sources),
    )


def _check_names(asked: Mapping[str, Choice], row: Row, facts: Mapping[str, ExtensionFacts]) -> None:
    for name in asked:
        if name in row.sources and asked[name] == "without":
            continue  # a direct-reference package (a git source) may be left out too
        if name not in facts:
            raise BadInputError(
                f"--build/--without {name!r}: not a package built against torch; the matrix knows "
                f"{', '.join(facts) or 'none'}{suggest(name, facts)}"
            )
        if name not in row.packages and asked[name] == "build":
            raise BadInputError(f"--build {name}: row {row.id} does not install {name}")


def _extension_steps(
    ext: ExtensionPlan, facts: ExtensionFacts, torch_reqs: tuple[str, ...], index: str | None
) -> tuple[list[Step], str | None]:
    """The steps that put one package built against torch in, and the warning it carries."""
    if ext.mode == "wheel":
        step = Step(
            name=ext.name,
            title=f"{ext.name} {ext.version} ({ext.reason})",
            requirements=(*torch_reqs, ext.requirement),
            index_url=index,
            extra_index_url=ext.index_url,
            no_build=(ext.distribution or ext.name,) if ext.index_url else (),
        )
        return [step], None
    if ext.mode == "without":
        return [], f"{ext.name} {ext.version} left out (--without {ext.name}): {ext.reason}"
    env = {"MAX_JOBS": str(ext.max_jobs), **facts.build_env}
    steps = [
        Step(
            name=f"{ext.name}-build-requires",
            title=f"what {ext.name}'s build needs, since it builds without isolation",
            requirements=(*torch_reqs, *facts.build_requires),
            index_url=index,
        ),
        Step(
            name=ext.name,
            title=f"{ext.name} {ext.version} (built against the installed torch)",
            requirements=(*torch_reqs, facts.build or ext.requirement),
            index_url=index,
            no_build_isolation=True,
            config_settings=facts.config_settings,
            env=tuple(sorted(env.items())),
            sdists=(ext.name,),  # the one package this step builds on purpose
        ),
    ]
    return steps, f"{ext.name} {ext.version}: {ext.reason}"


def _name(requirement: str) -> str:
    """The distribution a requirement line names (`verl[vllm]==0.9.1`, `flash-attn @ URL`)."""
    return re.split(r"[\[=@ ;]", requirement, maxsplit=1)[0]


def _extension_plan(
    plan: Plan, name: str, facts: ExtensionFacts, *, request: Choice, measured: _Measured, sources: _Sources
) -> ExtensionPlan:
    row = plan.row
    version = row.packages[name]
    without = without_reason(facts, row.verl.version)
    if request == "without":
        return ExtensionPlan(name=name, version=version, mode="without", reason=without)
    found, why_not = candidates(
        sources.sources,
        facts,
        row,
        name=name,
        version=version,
        python=plan.python,
        glibc=plan.target.glibc.value,
        seen=load_seen(plan.matrix.path),
    )
    if found and request == "auto":
        first = found[0]
        return ExtensionPlan(
            name=name,
            version=version,
            mode="wheel",
            reason=first.reason,
            url=first.url,
            sha256=first.sha256,
            cxx11abi=first.cxx11abi,
            source=first.source,
            distribution=first.distribution,
            candidates=tuple(found),
        )
    if request == "build" or sources.missing == "build":
        return _build_plan(row, name, version, measured)
    jobs = build_jobs(measured.cores, measured.memory_gib)
    raise InstallError(refusal(row, name, facts, why_not=why_not, without=without, jobs=jobs))


def _build_plan(row: Row, name: str, version: str, measured: _Measured) -> ExtensionPlan:
    cuda, nvcc = row.torch.cuda, measured.nvcc_version
    flag = "--build-flash-attn" if name == "flash-attn" else f"--build {name}"
    if cuda is None:
        raise InstallError(f"{name} {version} cannot be built for row {row.id}: its torch has no CUDA")
    if nvcc is None:
        raise InstallError(
            f"{flag} needs nvcc of CUDA {cuda} (CUDA_HOME/bin/nvcc or on PATH) and none was "
            f"found: install the CUDA toolkit, or use --without {name}; nothing was changed"
        )
    if nvcc.split(".")[0] != cuda.split(".")[0]:
        raise InstallError(
            f"{flag}: nvcc is CUDA {nvcc}, torch {row.torch.version} is built with "
            f"CUDA {cuda}; torch refuses to build extensions across CUDA majors. Put a CUDA "
            f"{cuda.split('.')[0]}.x toolkit first on PATH (or CUDA_HOME); nothing was changed"
        )
    jobs = build_jobs(measured.cores, measured.memory_gib)
    reason = (
        f"built from source with nvcc {nvcc} and MAX_JOBS={jobs} (from the cores and "
        f"{GIB_PER_BUILD_JOB} GiB of memory per job); this takes an hour or more"
    )
    return ExtensionPlan(name=name, version=version, mode="build", reason=reason, max_jobs=jobs)


def recipe_for(
    plan: Plan, requests: ExtensionRequests, env: Mapping[str, str], wheel_sources: tuple[str, ...] = ()
) -> Recipe:
    """The plan's recipe; a build request measures nvcc, cores and memory first."""
    build = "build" in requests.values()
    return build_recipe(
        plan,
        extensions=requests,
        nvcc_version=nvcc_version(env) if build else None,
        cores=online_cpus() if build else None,
        memory_gib=memory_gib() if build else None,
        wheel_sources=wheel_sources,
        env=env,
    )

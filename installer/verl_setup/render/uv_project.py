"""`render uv-project`: the row as a uv project (pyproject.toml with [tool.uv], .python-version)
and its uv.lock, made by `uv lock`, so that a team runs plain `uv sync` without verl-setup.

The project is the install recipe's last word: the verl step's pins, each package built against
torch as the recipe takes it (a wheel routed to its URL or index; one that must be built or is
left out stays out of the project, with the commands setup-venv.sh runs for it), the row's
`no_deps` packages as `[[tool.uv.dependency-metadata]]` with empty requires-dist (as verl 0.9.1's
pyproject declares them), its direct references as `[tool.uv.sources]`, its overrides, and
wheels only except the sdists built on purpose.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace

from verl_setup.plan.select import Plan
from verl_setup.plan.steps import TORCH_FAMILY, ExtensionPlan, Recipe, Step
from verl_setup.util.versions import minor_of

VENV = ".venv"  # where `uv sync` puts the environment


@dataclass(frozen=True, kw_only=True)
class ProjectIndex:
    """A named `[[tool.uv.index]]`, explicit: only the packages routed to it come from it."""

    name: str
    url: str
    why: str


@dataclass(frozen=True, kw_only=True)
class ProjectSource:
    """One `[tool.uv.sources]` entry: an inline table of (key, value) strings."""

    name: str
    fields: tuple[tuple[str, str | bool], ...]  # a bool only for `editable` (render/user_project.py)
    why: str


@dataclass(frozen=True, kw_only=True)
class NoDeps:
    """A `[[tool.uv.dependency-metadata]]` with empty requires-dist: installed without its dependencies."""

    name: str
    version: str | None


@dataclass(frozen=True, kw_only=True)
class LeftOut:
    """A package built against torch that the project does not carry, why, and how to add it."""

    name: str
    version: str
    why: str
    commands: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Project:
    """Everything pyproject.toml.jinja prints beyond the plan itself."""

    name: str
    python_minor: str
    dependencies: tuple[str, ...]
    indexes: tuple[ProjectIndex, ...]
    sources: tuple[ProjectSource, ...]
    no_deps: tuple[NoDeps, ...]
    no_binary: tuple[str, ...]
    environments: tuple[str, ...]
    left_out: tuple[LeftOut, ...]

    @property
    def warnings(self) -> tuple[str, ...]:
        """One line per package the project leaves out."""
        return tuple(f"{e.name} {e.version} is not in the uv project: {e.why}" for e in self.left_out)


def project(plan: Plan, recipe: Recipe) -> Project:
    """The uv project of a plan's recipe."""
    row = plan.row
    final = recipe.step("verl")
    deps = list(final.requirements if final else row.requirements())
    indexes: list[ProjectIndex] = []
    sources: list[ProjectSource] = []
    if recipe.user.requirements:
        from verl_setup.render.user_project import user_dependencies  # noqa: PLC0415

        theirs, entries = user_dependencies(recipe)
        sources = [ProjectSource(name=n, fields=f, why=w) for n, f, w in entries]
        mine = {d for d in deps if _name(d) != "verl" and not d.startswith(("-", "/"))}
        deps = [d for d in deps if d in mine] + theirs if recipe.user.verl else deps + theirs
    if plan.index_url is not None:
        indexes.append(
            ProjectIndex(
                name=_index_name(row.torch.index, "torch"), url=plan.index_url, why="the row's torch"
            )
        )
        sources += [
            ProjectSource(name=n, fields=(("index", indexes[0].name),), why="the row's torch index")
            for n in TORCH_FAMILY
            if any(_name(d) == n for d in deps)
        ]
    left_out = []
    for ext in recipe.extensions:
        if ext.mode != "wheel":
            left_out.append(_left_out(ext, recipe))
            continue
        deps.append(f"{ext.name}=={ext.version}")
        if ext.url:
            sources.append(ProjectSource(name=ext.name, fields=(("url", ext.url),), why=ext.reason))
        elif ext.index_url:
            index = ProjectIndex(name=_index_name(ext.source, ext.name), url=ext.index_url, why=ext.reason)
            if index.name not in {i.name for i in indexes}:
                indexes.append(index)
            sources.append(ProjectSource(name=ext.name, fields=(("index", index.name),), why=ext.reason))
    loose = recipe.step("no-deps")
    for name in dict.fromkeys((*row.no_deps, *row.sources)):
        if name in recipe.left_out_sources or loose is None:
            continue
        if name in row.sources:
            deps.append(name)  # a direct reference is pinned by its revision, not a version
            sources.append(_direct_source(name, row.sources[name]))
        else:
            deps.append(f"{name}=={row.packages[name]}")
    no_deps = tuple(
        NoDeps(name=n, version=None if n in row.sources else row.packages.get(n))
        for n in row.no_deps
        if n not in recipe.left_out_sources
    )
    built = tuple(n for n in row.sources if n not in recipe.left_out_sources)
    return Project(
        name=_project_name(row.id),
        python_minor=minor_of(plan.python),
        dependencies=tuple(deps),
        indexes=tuple(indexes),
        sources=tuple(sources),
        no_deps=no_deps,
        no_binary=tuple(dict.fromkeys((*recipe.sdists, *built))),
        environments=tuple(
            f"sys_platform == 'linux' and platform_machine == '{arch}'" for arch in row.requires.arch
        ),
        left_out=tuple(left_out),
    )


def _left_out(ext: ExtensionPlan, recipe: Recipe) -> LeftOut:
    """A package the project cannot carry: left out (--without), or built after `uv sync` into the
    project's venv with the same commands setup-venv.sh runs (no wheel source has it)."""
    if ext.mode == "without":
        return LeftOut(
            name=ext.name, version=ext.version, why=f"left out (--without {ext.name}): {ext.reason}"
        )
    steps = [s for s in recipe.steps if s.name in (f"{ext.name}-build-requires", ext.name)]
    return LeftOut(
        name=ext.name,
        version=ext.version,
        why=(
            "no wheel source has it for this row, and a lock cannot build it against the synced "
            "torch: build it into .venv after `uv sync` with these commands (as setup-venv.sh "
            "does), then sync with `uv sync --inexact`, which keeps it"
        ),
        commands=tuple(_command(s) for s in steps),
    )


def _command(step: Step) -> str:
    """The step as one shell line against the project's venv (what setup-venv.sh runs)."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in step.env)
    # After `uv sync` the project's lock holds every distribution: no closure file is needed.
    step = replace(step, constraints=False, exclude_newer=None)
    pip_args = step.pip_args("overrides.txt", "constraints.txt")
    argv = ["uv", "pip", "install", "--python", f"{VENV}/bin/python", *pip_args]
    return (f"{env} " if env else "") + shlex.join(argv)


def _direct_source(name: str, reference: str) -> ProjectSource:
    """`git+URL[@REV]` as uv's git source, any other direct reference as a URL source."""
    if reference.startswith("git+"):
        url, sep, rev = reference[4:].rpartition("@")
        if sep and "/" not in rev and "://" in url:
            return ProjectSource(name=name, fields=(("git", url), ("rev", rev)), why="the row's git source")
        return ProjectSource(name=name, fields=(("git", reference[4:]),), why="the row's git source")
    return ProjectSource(name=name, fields=(("url", reference),), why="the row's direct reference")


def _index_name(source: str | None, package: str) -> str:
    """A uv index name (letters, digits, `-`, `_`, `.`): the source's or index's own name where it
    is one (`verl-wheelhouse`), else one from the package (`--wheel-source URL` is `flash-attn-wheels`)."""
    if source and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", source):
        return source
    return re.sub(r"[^A-Za-z0-9._-]+", "-", package).strip("-._") + "-wheels"


def _project_name(row_id: str) -> str:
    """A PEP 508 project name for the row (its id is a NAME: `+` is the one character to replace)."""
    return "verl-env-" + (re.sub(r"[^A-Za-z0-9._-]+", "-", row_id).strip("-._") or "row")


def _name(requirement: str) -> str:
    return re.split(r"[\[=@ ;<>!~]", requirement, maxsplit=1)[0]

"""The user's packages in the uv project: each a dependency by name, a git ref or a local checkout
as a `[tool.uv.sources]` entry (git at its commit; a checkout editable, as `uv add --editable`
writes it)."""

from __future__ import annotations

from pathlib import Path

from verl_setup.plan.steps import Recipe
from verl_setup.plan.user_packages import UserRequirement
from verl_setup.plan.verl_source import split_ref

# One `[tool.uv.sources]` entry: name, (key, value) fields, why (uv_project.Source is built from it).
SourceEntry = tuple[str, tuple[tuple[str, str | bool], ...], str]


def user_dependencies(recipe: Recipe, project_dir: Path | None = None) -> tuple[list[str], list[SourceEntry]]:
    """The dependencies and sources the user's packages add (verl with the row's extras)."""
    deps: list[str] = []
    sources: list[SourceEntry] = []
    for req in recipe.user.requirements:
        extras = set(req.extras) | (set(recipe.row.verl.extras) if req.name == "verl" else set())
        name = req.name + (f"[{','.join(sorted(extras))}]" if extras else "")
        if req.kind == "index":
            deps.append(req.text if req.name != "verl" else name)
            continue
        deps.append(name)
        sources.append(_source(req, project_dir))
    return deps, sources


def _source(req: UserRequirement, project_dir: Path | None) -> SourceEntry:
    why = f"your package ({req.origin})"
    if req.kind == "git" and req.url:
        repo, rev = split_ref(req.url)
        fields: tuple[tuple[str, str | bool], ...] = (("git", repo),) + ((("rev", rev),) if rev else ())
        return req.name, fields, why
    if req.kind == "path" and req.path is not None:
        path = str(req.path)
        if project_dir is not None and req.path.is_relative_to(project_dir):
            path = str(req.path.relative_to(project_dir))
        return req.name, (("path", path), ("editable", req.editable)), why
    return req.name, (("url", req.url or req.text),), why

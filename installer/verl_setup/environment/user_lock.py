"""The user's packages in a lock: added packages are hashed like the row's, a git ref stands at its
full commit (plan/verl_source.pin_commits), and a local editable checkout, which no hash can
name, is left out of the hashed body and recorded as a local step in the sealed header."""

from __future__ import annotations

import shlex

from verl_setup.plan.steps import Recipe


def local_editables(recipe: Recipe) -> list[str]:
    """The `-e PATH[extras]` of each local checkout the recipe installs editable."""
    out = []
    for req in recipe.user.requirements:
        if req.kind == "path" and req.path is not None:
            extras = set(req.extras)
            if req.name == "verl":
                extras |= set(recipe.row.verl.extras)
            out.append(str(req.path) + (f"[{','.join(sorted(extras))}]" if extras else ""))
    return out


def local_field(recipe: Recipe) -> str | None:
    """The header's `local` step: the command that installs the checkouts after the lock's wheels."""
    paths = local_editables(recipe)
    if not paths:
        return None
    return shlex.join(["uv", "pip", "install", "--no-deps", *(a for p in paths for a in ("-e", p))])


def local_warnings(recipe: Recipe) -> list[str]:
    """What a lock with a local checkout cannot promise."""
    return [
        f"{path} is a local checkout: the lock records it as a local step, not by hash; a team lock "
        "should name a git commit instead (--with 'NAME @ git+URL@COMMIT')"
        for path in local_editables(recipe)
    ]


def git_field(recipe: Recipe) -> str | None:
    """The header's `git` step: each git ref at its full commit, installed after the lock's wheels
    (uv and pip refuse a line without a hash in a hashed file; a full commit names the tree)."""
    refs = [r for r in recipe.user.requirements if r.kind == "git"]
    if not refs:
        return None
    lines = []
    for req in refs:
        extras = set(req.extras) | (set(recipe.row.verl.extras) if req.name == "verl" else set())
        lines.append(f"{req.name}{'[' + ','.join(sorted(extras)) + ']' if extras else ''} @ {req.url}")
    return shlex.join(["uv", "pip", "install", "--no-deps", *lines])


def with_field(recipe: Recipe) -> str | None:
    """The header's `with`: the names of the user's packages (install --lock then takes sdists too)."""
    return ", ".join(r.name for r in recipe.user.requirements) or None


def strip_editables(body: str) -> str:
    """uv's output without its `-e` and git lines (the header's steps) and the `# via` notes under them."""
    out, dropping = [], False
    for line in body.splitlines(keepends=True):
        if line.startswith("-e ") or " @ git+" in line.split("#", 1)[0]:
            dropping = True
            continue
        if dropping and line.lstrip().startswith("#") and line[:1].isspace():
            continue
        dropping = False
        out.append(line)
    return "".join(out)


def local_command(uv: str, python_exe: str, field: str) -> list[str]:
    """The lock's `local` step as this machine's uv command into the interpreter's environment."""
    argv = shlex.split(field)
    return [uv, "pip", "install", "--python", python_exe, *argv[3:]]


def requirement_lines(requirements: tuple[str, ...]) -> list[str]:
    """Step arguments as requirement-file lines (`-e PATH` stays one line)."""
    lines, pending = [], ""
    for arg in requirements:
        if arg == "-e":
            pending = "-e "
            continue
        lines.append(pending + arg)
        pending = ""
    return lines


def without_binary_only(options: str) -> str:
    """A lock with the user's packages takes wheel or sdist, as uv does by default (word2number
    has no wheel); the row's pins are versions with wheels, which uv prefers."""
    return "".join(
        line + "\n" for line in options.splitlines() if not line.startswith(("--only-binary", "--no-binary"))
    )

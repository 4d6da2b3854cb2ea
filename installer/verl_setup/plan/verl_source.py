"""verl from the user instead of the index: a checkout (its `verl/version/version` picks the row's
verl line), a git URL at a commit, a fork. Reads the checkout and asks git; changes nothing."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

from verl_setup.errors import BadInputError, InstallError
from verl_setup.matrix.schema import Row
from verl_setup.plan.user_packages import UserPackages, UserRequirement
from verl_setup.util.bounded import one_line

VERSION_FILE = Path("verl") / "version" / "version"
_SHA = re.compile(r"[0-9a-f]{40}")


def checkout_version(path: Path) -> str | None:
    """The version a verl checkout declares (verl's setup.py reads the same file), or None."""
    try:
        text = (path / VERSION_FILE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def verl_line(version: str, rows: list[Row]) -> tuple[str | None, str | None]:
    """The verl line (`0.7`) a checkout of `version` asks for, and a warning: a checkout newer than
    every row gets no line (the newest row), with a warning; one older than every row gets its own
    line, which selection then refuses with the rows it has."""
    try:
        parsed = Version(version)
    except InvalidVersion as exc:
        raise BadInputError(
            f"the verl checkout's {VERSION_FILE} says {one_line(version)!r}: not a version"
        ) from exc
    line = f"{parsed.major}.{parsed.minor}"
    lines = {Version(r.verl.version).release[:2] for r in rows}
    if (parsed.major, parsed.minor) in lines:
        return line, None
    newest = max(lines, default=(0, 0))
    if (parsed.major, parsed.minor) > newest:
        return None, (
            f"the verl checkout is {version}, newer than every row's verl (newest {newest[0]}.{newest[1]}): "
            "the newest row is taken; its pins may be older than the checkout wants"
        )
    return line, None


def requested_version(req: UserRequirement) -> str | None:
    """The version a user's verl declares: a checkout's version file (a git URL's is unknown here)."""
    if req.kind == "path" and req.path is not None:
        return checkout_version(req.path)
    return None


def pinned_commit(url: str, *, git: str = "git", env: dict[str, str] | None = None) -> str:
    """The full commit a `git+URL@REF` names (`git ls-remote`; a full sha is taken as is)."""
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    repo, ref = split_ref(url)
    if _SHA.fullmatch(ref):
        return ref
    try:
        out = run([git, "ls-remote", repo, ref or "HEAD"], timeout=120, env=env)
    except ProgramError as exc:
        raise InstallError(f"git ls-remote {repo}: {exc}") from exc
    if out.returncode != 0:
        raise InstallError(
            f"git cannot read {repo}: {one_line(out.stderr.strip()) or 'exit ' + str(out.returncode)}"
        )
    for line in out.stdout.splitlines():
        sha, _, name = line.partition("\t")
        if name in (
            ref,
            f"refs/heads/{ref}",
            f"refs/tags/{ref}",
            f"refs/tags/{ref}^{{}}",
            "HEAD",
        ) and _SHA.fullmatch(sha):
            return sha
    raise InstallError(f"{repo} has no ref {ref!r} (git ls-remote)")


def split_ref(url: str) -> tuple[str, str]:
    """`git+URL@REF` -> (URL, REF); REF is "" when the URL names none."""
    bare = url.removeprefix("git+")
    path = bare.split("://", 1)[-1]
    if "@" not in path.rsplit("/", 1)[-1]:
        return bare, ""
    repo, _, ref = bare.rpartition("@")
    return repo, ref


def at_commit(req: UserRequirement, sha: str) -> str:
    """The git requirement with its ref replaced by the full commit."""
    parsed = Requirement(req.text)
    repo, _ = split_ref(parsed.url or "")
    extras = f"[{','.join(sorted(parsed.extras))}]" if parsed.extras else ""
    return f"{parsed.name}{extras} @ git+{repo}@{sha}"


def pin_commits(user: UserPackages, env: dict[str, str] | None = None) -> UserPackages:
    """Every git requirement at its full commit (what a lock, an image or a bundle records)."""
    out = []
    for req in user.requirements:
        if req.kind == "git" and req.url is not None:
            sha = pinned_commit(req.url, env=env)
            req = replace(req, text=at_commit(req, sha))  # noqa: PLW2901  # the same requirement, pinned
        out.append(req)
    return replace(user, requirements=tuple(out))

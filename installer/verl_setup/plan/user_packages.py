"""The user's own packages (`--with`, `--with-requirements`, `--with-editable`, the team config's
`with*` keys), parsed once into typed requirements, in uv's own vocabulary.

A package named verl among them replaces the row's verl (plan/verl_source.py reads its checkout);
every other one is added on top of the row, whose pins never move (plan/user_recipe.py).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.utils import canonicalize_name  # loaded on every plan's path already (plan/whole_wheel)

from verl_setup.errors import BadInputError
from verl_setup.util.bounded import one_line

Kind = Literal["index", "git", "url", "path"]
MAX_REQUIREMENTS_FILE = 1 << 20
_SETUP_NAME = re.compile(r"""\bname\s*=\s*["']([A-Za-z0-9][A-Za-z0-9._-]*)["']""")


@dataclass(frozen=True, kw_only=True)
class UserRequirement:
    """One package the user adds: what uv is given, its name, and where the request came from."""

    text: str  # a PEP 508 line (`word2number==1.1`, `verl @ git+URL@REF`) or the path of a checkout
    name: str  # canonical
    origin: str  # `--with`, `--with-requirements FILE`, `--with-editable`, `config FILE (with)`
    kind: Kind
    editable: bool = False
    path: Path | None = None  # a local checkout (kind path)
    extras: tuple[str, ...] = ()
    specifier: str = ""  # the version bounds of an index requirement (`<2`, `==1.1`)

    @property
    def url(self) -> str | None:
        """The direct reference of a git or URL requirement."""
        if self.kind not in ("git", "url"):
            return None
        from packaging.requirements import Requirement  # noqa: PLC0415  # only for added packages

        return Requirement(self.text).url

    def uv_args(self) -> list[str]:
        """The arguments of `uv pip install`/`compile` that ask for it."""
        if self.kind == "path" and self.path is not None:
            target = str(self.path) + (f"[{','.join(self.extras)}]" if self.extras else "")
            return ["-e", target] if self.editable else [target]
        return [self.text]

    def requirement_line(self) -> str:
        """The same as one line of a requirements file."""
        return " ".join(self.uv_args())

    def shown(self) -> str:
        """How messages name it: the line as the user wrote it."""
        return self.requirement_line() if self.kind == "path" else self.text

    def to_json(self) -> dict[str, object]:
        """The manifest's and the plan's record of it."""
        return {
            "name": self.name,
            "requirement": self.shown(),
            "kind": self.kind,
            "editable": self.editable,
            "path": None if self.path is None else str(self.path),
            "url": self.url,
            "origin": self.origin,
        }


@dataclass(frozen=True, kw_only=True)
class UserPackages:
    """Everything the user adds to the row, in the order given, and the packages kept as installed."""

    requirements: tuple[UserRequirement, ...] = ()
    keep: tuple[str, ...] = ()  # canonical names (`--keep NAME`): a site's own build stays

    def __bool__(self) -> bool:
        return bool(self.requirements or self.keep)

    @property
    def verl(self) -> UserRequirement | None:
        """A verl that replaces the row's (a checkout, a git URL at a commit, a fork)."""
        return next((r for r in self.requirements if r.name == "verl"), None)

    @property
    def added(self) -> tuple[UserRequirement, ...]:
        """Every package added on top of the row (verl itself left to the verl step)."""
        return tuple(r for r in self.requirements if r.name != "verl")

    def names(self) -> set[str]:
        """The canonical names the user asked for."""
        return {r.name for r in self.requirements}

    def to_json(self) -> list[dict[str, object]]:
        """The list a manifest, a plan and a dry run print."""
        return [r.to_json() for r in self.requirements]


def parse_with(text: str, origin: str, base: Path | None = None) -> UserRequirement:
    """One `--with REQ` (or a requirements-file line): a PEP 508 requirement, a local path (editable
    by default, as a checkout is meant to be edited), or BadInputError in one line."""
    stripped = text.strip()
    if not stripped:
        raise BadInputError(f"{origin}: an empty requirement")
    if _looks_like_path(stripped):
        return parse_editable(stripped, origin, base)
    # packaging's requirement grammar costs ~10 ms to import: a plan without --with never pays it
    from packaging.requirements import InvalidRequirement, Requirement  # noqa: PLC0415

    try:
        req = Requirement(stripped)
    except InvalidRequirement as exc:
        raise BadInputError(
            f"{origin} {one_line(stripped)!r}: not a requirement uv reads ({one_line(str(exc))})"
        ) from exc
    name = canonicalize_name(req.name)
    if req.url is None:
        return UserRequirement(
            text=stripped, name=name, origin=origin, kind="index", extras=tuple(sorted(req.extras)),
            specifier=str(req.specifier),
        )  # fmt: skip
    if req.url.startswith("git+"):
        return UserRequirement(
            text=stripped, name=name, origin=origin, kind="git", extras=tuple(sorted(req.extras))
        )
    if req.url.startswith("file://"):
        return parse_editable(req.url.removeprefix("file://"), origin, base, extras=tuple(sorted(req.extras)))
    return UserRequirement(
        text=stripped, name=name, origin=origin, kind="url", extras=tuple(sorted(req.extras))
    )


def parse_editable(
    text: str, origin: str, base: Path | None = None, *, extras: tuple[str, ...] = ()
) -> UserRequirement:
    """`--with-editable PATH[extras]`: a local project, installed editable; its name from its metadata."""
    path_text, extras_text = text, ""
    m = re.fullmatch(r"(.*?)\[([A-Za-z0-9._,\s-]+)\]", text)
    if m:
        path_text, extras_text = m[1], m[2]
    given = Path(path_text).expanduser()
    path = (given if given.is_absolute() or base is None else base / given).absolute()
    if not path.is_dir():
        raise BadInputError(f"{origin} {one_line(text)!r}: no such folder")
    name = project_name(path)
    if name is None:
        raise BadInputError(
            f"{origin} {one_line(str(path))!r}: not a Python project (no pyproject.toml [project] name, "
            "setup.cfg or setup.py name)"
        )
    more = tuple(sorted({*extras, *(e.strip() for e in extras_text.split(",") if e.strip())}))

    return UserRequirement(
        text=str(path), name=canonicalize_name(name), origin=origin, kind="path", editable=True, path=path,
        extras=more,
    )  # fmt: skip


def project_name(path: Path) -> str | None:
    """The distribution a local project builds: pyproject's [project] name, else setup.cfg's or setup.py's."""
    pyproject = path / "pyproject.toml"
    if pyproject.is_file():
        if sys.version_info >= (3, 11):
            import tomllib  # noqa: PLC0415
        else:
            import tomli as tomllib  # noqa: PLC0415
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            data = {}
        name = data.get("project", {}).get("name") if isinstance(data.get("project"), dict) else None
        if isinstance(name, str) and name:
            return name
    for file in ("setup.cfg", "setup.py"):
        try:
            found = _SETUP_NAME.search((path / file).read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        if found:
            return found[1]
    return None


def read_requirements(path: Path, origin: str) -> list[UserRequirement]:
    """`--with-requirements FILE`: one requirement a line, `#` comments, `-e PATH` for an editable."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BadInputError(f"{origin}: cannot read {one_line(str(path))!r}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_REQUIREMENTS_FILE:
        raise BadInputError(f"{origin}: {one_line(str(path))!r} is over {MAX_REQUIREMENTS_FILE} bytes")
    found = []
    for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        text = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not text:
            continue
        where = f"{origin} (line {number})"
        if text.startswith(("-e ", "--editable ")):
            found.append(parse_editable(text.split(None, 1)[1], where, path.parent))
        elif text.startswith("-"):
            raise BadInputError(
                f"{where}: the option {one_line(text)!r} is not read here; give requirements only"
            )
        else:
            found.append(parse_with(text, where, path.parent))
    return found


def collect(
    *,
    with_: list[str],
    with_requirements: list[Path],
    with_editable: list[str],
    keep: list[str] = (),  # type: ignore[assignment]  # a read-only default
    config: dict[str, tuple[str, ...]] | None = None,
    config_path: Path | None = None,
) -> UserPackages:
    """The flags' and the team config's packages as one UserPackages; one name given twice is refused."""
    reqs: list[UserRequirement] = []
    base = None if config_path is None else config_path.parent
    for key, values in (config or {}).items():
        origin = f"config {config_path} ({key})"
        for value in values:
            if key == "with":
                reqs.append(parse_with(value, origin, base))
            elif key == "with_requirements":
                reqs += read_requirements((base or Path()) / value, origin)
            elif key == "with_editable":
                reqs.append(parse_editable(value, origin, base))
    reqs += [parse_with(text, "--with") for text in with_]
    for file in with_requirements:
        reqs += read_requirements(file, f"--with-requirements {file}")
    reqs += [parse_editable(text, "--with-editable") for text in with_editable]
    seen: dict[str, UserRequirement] = {}
    for req in reqs:
        if req.name in seen and seen[req.name].shown() != req.shown():
            raise BadInputError(
                f"{req.name} is asked for twice: {seen[req.name].shown()!r} ({seen[req.name].origin}) and "
                f"{req.shown()!r} ({req.origin}); give it once"
            )
        seen.setdefault(req.name, req)

    return UserPackages(requirements=tuple(seen.values()), keep=tuple(canonicalize_name(k) for k in keep))


def _looks_like_path(text: str) -> bool:
    return text.startswith(("/", "./", "../", "~")) or text in (".", "..")

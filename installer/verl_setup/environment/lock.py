"""Hashed lock files: resolve a row for its target Python and platform, write, read and check.

A lock is `uv pip compile --generate-hashes` output under a header that names the row, the
matrix and uv, sealed by the sha256 of every other line, header and body: `install --lock` refuses
a lock edited after it was written (a row, Python or index-url line as much as a pin) before
anything changes, and uv refuses any file whose hash differs from the lock's. No timestamps: the same
row, matrix and index give the same bytes. Format 4 puts the row's index and the binary-only
options into the body, as requirement-file options that uv and pip read, and names in its header
the plain commands that install it (PEP 751's pylock.toml: environment/pylock.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from packaging.utils import canonicalize_name, parse_wheel_filename

from verl_setup.environment.pylock import is_pylock_name, read_pylock, render_pylock
from verl_setup.errors import BadInputError, InstallError
from verl_setup.plan.select import Plan
from verl_setup.util.secrets import without_credentials

if TYPE_CHECKING:
    from verl_setup.plan.steps import Choice, ExtensionRequests, Recipe, Step

FORMAT_LINE = (
    "# verl-setup lock, format 4: a hashed requirements file for uv, pip or verl-setup; sealed, do not edit"
)
# Format 3 has the same header less the install lines, and no options in its body: install --lock
# gives uv the row's index and the binary-only options itself, so it still reads one.
_OLDER_LINES = {3: "# verl-setup lock, format 3: install with `verl-setup install --lock FILE`; do not edit"}
_FORMAT_RE = re.compile(r"^# verl-setup lock, format (\d+):")
# pip older than 23.3 refuses, in hash-checking mode, a dependency that asks for extras of a locked
# package (transferqueue's `ray[default]`: pypa/pip#9644); with --no-deps it installs the lock as
# written, which lists every dependency already. The oldest pip tested: Debian 12's.
OLDEST_PIP = "23.0.1"
SEAL = "sha256"  # the last header line: the digest of the whole file without that line
COMPILE_TIMEOUT_S = 900.0
_KEYS = (
    "row",
    "row-sha256",
    "matrix",
    "matrix-sha256",
    "python",
    "platform",
    "index-url",
    "flash-attn",
    "uv",
)
# Format 4: the plain commands that install the lock (the file's own name left to the reader).
_INSTALL_KEYS = ("create-env", "install-uv", "install-pip")
# Written only when the row builds more than flash-attn against torch ("name=mode version, ..."),
# and when the recipe installs something after the locked wheels (`then`: each command, "; ").
# with, local, git: the user's packages (environment/user_lock.py)
_OPTIONAL_KEYS = ("torch-extensions", "then", "with", "local", "git")
_URL_PIN_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*) @ (\S+\.whl)\s*\\?$")
_PIN_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


@dataclass(frozen=True, kw_only=True)
class Pin:
    """One locked distribution (canonical name), with the environment marker uv attached."""

    name: str
    version: str
    marker: str | None = None


@dataclass(frozen=True, kw_only=True)
class Lock:
    """A lock file's header fields and pins."""

    path: Path
    fields: dict[str, str]
    pins: tuple[Pin, ...]
    kind: str = "requirements"  # or "pylock" (PEP 751)

    @property
    def python(self) -> str:
        """The exact Python the lock was resolved for."""
        return self.fields["python"]

    @property
    def index_url(self) -> str | None:
        """The row's extra index, or None for the default one."""
        url = self.fields["index-url"]
        return None if url == "default" else url

    @property
    def flash_attn(self) -> str:
        """How the lock carries flash-attn: wheel (a hashed line), build, without, or none."""
        return self.fields["flash-attn"].split()[0]

    def extension_modes(self) -> dict[str, str]:
        """How the lock carries each package built against torch: wheel, build, without or none."""
        modes = {"flash-attn": self.flash_attn}
        for item in filter(None, (p.strip() for p in self.fields.get("torch-extensions", "").split(","))):
            name, _, rest = item.partition("=")
            modes[name] = rest.split()[0] if rest else "none"
        return modes

    def requests(self, asked: ExtensionRequests) -> dict[str, Choice]:
        """The recipe requests for installing this lock: what it was made with, unless told to leave
        a package out."""
        out: dict[str, Choice] = {}
        for name, mode in self.extension_modes().items():
            want = asked.get(name, "auto")
            if want == "without" and mode == "wheel":
                raise BadInputError(
                    f"{self.path} carries the {name} wheel, so --without {name} cannot leave it out: "
                    f"make the lock with --without {name}"
                )
            if want == "without" or mode in ("without", "none"):
                out[name] = "without"
            elif mode == "build":
                if want != "build":
                    flag = "--build-flash-attn" if name == "flash-attn" else f"--build {name}"
                    raise InstallError(
                        f"{self.path}: {name} must be built against torch for this lock (it was made with "
                        f"{flag}): pass {flag}, or --without {name}"
                    )
                out[name] = "build"
        return out

    @property
    def row_id(self) -> str:
        """The matrix row the lock was made from."""
        return self.fields["row"]


def render(fields: Mapping[str, str], body: str) -> str:
    """The lock text: header, then the body (options, uv's output unchanged), sealed by the
    header's last line. `fields` without the install lines gets them from its index-url."""
    index = None if fields["index-url"] == "default" else fields["index-url"]
    fields = {**install_lines(index, fields["python"]), **fields}
    keys = (*_INSTALL_KEYS, *_KEYS, *(k for k in _OPTIONAL_KEYS if k in fields))
    header = "".join(f"{line}\n" for line in (FORMAT_LINE, *(f"# {key}: {fields[key]}" for key in keys)))
    return f"{header}# {SEAL}: {_digest(header + body)}\n{body}"


def install_lines(index_url: str | None, python: str) -> dict[str, str]:
    """The header's plain install commands. uv takes the row's index from the body, but by default
    only the first index that has a package at all (PyTorch's also serves numpy, at other versions),
    so it needs the strategy verl-setup gives it; pip weighs every index alike."""
    strategy = " --index-strategy unsafe-best-match" if index_url else ""
    from verl_setup.environment.lock_howto import create_env  # noqa: PLC0415

    return {
        "create-env": create_env(python),
        "install-uv": f"uv pip sync{strategy} <this file>",
        "install-pip": f"pip install --no-deps -r <this file> (pip {OLDEST_PIP} or newer)",
    }


def body_options(index_url: str | None, sdists: Sequence[str]) -> str:
    """The requirement-file options a plain uv or pip needs: the row's index (beside the user's
    default one, a mirror included), and wheels only except the sdists built on purpose (pip reads
    `--no-binary` after `--only-binary :all:` as the exception; the other way round it clears it)."""
    lines = [f"--extra-index-url {index_url}"] if index_url else []
    lines += ["--only-binary :all:", *(f"--no-binary {name}" for name in sdists)]
    return "".join(f"{line}\n" for line in lines)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _format_of(first: str, path: Path) -> int:
    if first == FORMAT_LINE:
        return 4
    old = _FORMAT_RE.match(first)
    if old and _OLDER_LINES.get(int(old[1])) == first:
        return int(old[1])
    if old:
        raise BadInputError(
            f"{path}: a format {old[1]} lock, whose seal leaves its header open to edits: "
            "make it again with `verl-setup lock --out FILE`"
        )
    raise BadInputError(f"{path}: not a verl-setup lock (make one with `verl-setup lock --out FILE`)")


def parse(text: str, path: Path) -> Lock:
    """Read a lock (format 4, or 3); BadInputError if it is not one, InstallError if it was altered."""
    lines = text.splitlines(keepends=True)
    number = _format_of(lines[0].rstrip("\n") if lines else "", path)
    known = (*(_INSTALL_KEYS if number >= 4 else ()), *_KEYS, *_OPTIONAL_KEYS, SEAL)
    fields: dict[str, str] = {}
    index = 1  # the first body line, after the seal
    for line in lines[1:]:
        m = re.match(r"^# ([a-z0-9-]+): (.*)$", line.rstrip("\n"))
        if m is None or m[1] in fields or m[1] not in known:
            break
        fields[m[1]] = m[2]
        index += 1
        if m[1] == SEAL:
            break
    missing = [k for k in (*_KEYS, SEAL) if k not in fields]
    if missing:
        raise BadInputError(f"{path}: lock header lacks {', '.join(missing)}")
    header, body = "".join(lines[: index - 1]), "".join(lines[index:])
    if lines[index - 1].rstrip("\n") != f"# {SEAL}: {fields[SEAL]}" or _digest(header + body) != fields[SEAL]:
        raise InstallError(
            f"{path} was changed after `verl-setup lock` wrote it (its header or body no longer "
            f"matches {SEAL}); regenerate it rather than editing it"
        )
    pins = []
    for line in body.splitlines():
        m = _PIN_RE.match(line)
        if m:
            pins.append(Pin(name=canonicalize_name(m[1]), version=m[2], marker=m[3]))
        url = _URL_PIN_RE.match(line)
        if url:
            # A prebuilt wheel: its file name carries a local label (+cu12torch2.8...) that the
            # installed metadata does not, so the public version is what verify compares.
            name, version, _, _ = parse_wheel_filename(unquote(url[2].rsplit("/", 1)[-1]))
            # ... but a wheel of the user's own (a bundle's build of their checkout) keeps its label.
            theirs = {canonicalize_name(n.strip()) for n in fields.get("with", "").split(",")}
            shown = str(version) if canonicalize_name(name) in theirs else version.public
            pins.append(Pin(name=canonicalize_name(name), version=shown))
    if not pins:
        raise BadInputError(f"{path}: the lock pins no distributions")
    return Lock(path=path, fields=fields, pins=tuple(pins))


def read_lock(path: Path) -> Lock:
    """Read and check a lock file: a verl-setup lock, or the pylock.toml `lock --format pylock` wrote."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"cannot read lock {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    return parse_pylock(text, path) if is_pylock_name(path.name) else parse(text, path)


def parse_pylock(text: str, path: Path) -> Lock:
    """Read a pylock `lock --format pylock` wrote (environment/pylock.py checks its seal)."""
    fields, packages = read_pylock(text, path, _KEYS)
    lock = Lock(path=path, fields=fields, pins=(), kind="pylock")
    # A prebuilt extension wheel's version carries its build label (+cu12torch2.8...), which the
    # installed metadata does not: verify compares the public version, as for a requirements lock.
    wheels = {name for name, mode in lock.extension_modes().items() if mode == "wheel"}
    # ... and by the distribution a whole-project wheel carries it as (`=wheel 2.16.1 as transformer-engine`).
    extensions = lock.fields.get("torch-extensions", "")
    wheels |= {canonicalize_name(m[1]) for m in re.finditer(r"=wheel \S+ as ([A-Za-z0-9._-]+)", extensions)}
    pins = []
    for package in packages:
        name = canonicalize_name(str(package.get("name", "")))
        version = str(package.get("version", ""))
        if name in wheels:
            version = version.split("+", 1)[0]  # the public version: what precedes the local label
        pins.append(Pin(name=name, version=version, marker=package.get("marker")))
    return replace(lock, pins=tuple(pins))


def after_lock(recipe: Recipe) -> list[Step]:
    """The recipe's steps a lock leaves to after its wheels: a package built against torch (and
    what its build needs), and the packages installed without their dependencies."""
    built = [e.name for e in recipe.extensions if e.mode == "build"]
    # The lock pins every distribution already: these steps need no closure file beside it.
    return [
        dataclasses.replace(s, constraints=False, exclude_newer=None)
        for s in recipe.steps
        if s.name in built or s.name.removesuffix("-build-requires") in built or s.no_deps
    ]


def then_commands(recipe: Recipe) -> str | None:
    """The plain commands for after_lock's steps, "; "-separated (MAX_JOBS left to the machine
    that builds: it is measured there, and the lock stays the same bytes everywhere)."""
    commands = []
    for step in after_lock(recipe):
        env = "".join(f"{k}={shlex.quote(v)} " for k, v in step.env if k != "MAX_JOBS")
        pip_args = step.pip_args("overrides.txt", "constraints.txt")
        commands.append(env + shlex.join(["uv", "pip", "install", *pip_args]))
    return "; ".join(commands) or None


def resolve(plan: Plan, recipe: Recipe, *, uv: str, env: Mapping[str, str], extra: Sequence[str] = ()) -> str:
    """`uv pip compile` of the recipe's final pins (and extension wheels) with hashes for its Python
    and platform (`extra`: more uv flags, such as the output format); return uv's output."""
    from verl_setup.environment.user_lock import requirement_lines, strip_editables  # noqa: PLC0415
    from verl_setup.environment.uv import compile_command, explain_failure, write_inputs  # noqa: PLC0415
    from verl_setup.environment.with_resolve import without_binary_only  # noqa: PLC0415
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    row = plan.row
    final = recipe.step("with") or recipe.step("verl")  # the user's step asks for every row pin too
    requirements = requirement_lines(final.requirements) if final else row.requirements()
    requirements += [e.requirement for e in recipe.extensions if e.mode == "wheel"]
    with tempfile.TemporaryDirectory(prefix="verl-setup-lock-") as tmp:
        _, overrides = write_inputs(row, Path(tmp), requirements, constraints=recipe.constraints)
        # Relative input names, run from the folder: uv's "# via -r requirements.in" notes then
        # read the same on every machine.
        argv = compile_command(
            uv,
            row=row,
            matrix=plan.matrix,
            python=plan.python,
            requirements=Path("requirements.in"),
            overrides=None if overrides is None else Path(overrides.name),
            hashes=True,
            constraints=Path("constraints.txt") if recipe.constraints else None,
            exclude_newer=recipe.closure.exclude_newer if recipe.closure else None,
        )
        argv += extra
        if recipe.user.requirements:
            argv = without_binary_only(argv)
        try:
            out = run(argv, timeout=COMPILE_TIMEOUT_S, env=env, cwd=tmp)
        except ProgramError as exc:
            raise InstallError(f"uv pip compile: {exc}") from exc
    if out.returncode != 0:
        raise InstallError(
            f"row {row.id} does not resolve for Python {plan.python}: {explain_failure(out.stderr)}"
        )
    return strip_editables(out.stdout) if recipe.user.requirements else out.stdout


def lock_fields(plan: Plan, recipe: Recipe, *, uv: str) -> dict[str, str]:
    """What a lock records besides its pins: row, matrix, Python, platform, index, extensions, uv."""
    from verl_setup.environment.uv import python_platform, uv_version  # noqa: PLC0415

    row, fa = plan.row, recipe.flash_attn
    fields = {
        "row": row.id,
        "row-sha256": row.content_hash(),
        "matrix": plan.matrix.path.name,
        "matrix-sha256": plan.matrix.sha256,
        "python": plan.python,
        "platform": python_platform(row),
        "index-url": plan.index_url or "default",
        "flash-attn": "none" if fa is None else f"{fa.mode} {fa.version}",
        "uv": uv_version(uv),
    }
    others = [e for e in recipe.extensions if e.name != "flash-attn"]
    if others:
        # A whole-project wheel (TransformerEngine) says which distribution carries the package.
        carried = [(f"{e.name}={e.mode} {e.version}", e.distribution) for e in others]
        fields["torch-extensions"] = ", ".join(c + (f" as {d}" if d else "") for c, d in carried)
    then = then_commands(recipe)
    if then:
        fields["then"] = then
    from verl_setup.environment.user_lock import git_field, local_field, with_field  # noqa: PLC0415

    for key, value in (
        ("with", with_field(recipe)),
        ("local", local_field(recipe)),
        ("git", git_field(recipe)),
    ):
        if value:
            fields[key] = value
    return fields


def compile_lock(plan: Plan, recipe: Recipe, *, uv: str, env: Mapping[str, str]) -> str:
    """Resolve the recipe's pins with hashes for its Python and platform; return the lock text.

    flash-attn goes in as its prebuilt wheel (uv hashes the file it downloads), so the lock
    installs as it stands; a flash-attn to be built is left out and named in the header, with the
    command that builds it after the locked wheels (`then`).
    """
    from verl_setup.environment.user_lock import without_binary_only  # noqa: PLC0415

    body = without_credentials(resolve(plan, recipe, uv=uv, env=env))
    options = body_options(plan.index_url, recipe.sdists)
    if recipe.user.requirements:
        options = without_binary_only(options)
    return render(lock_fields(plan, recipe, uv=uv), options + body)


def compile_pylock(plan: Plan, recipe: Recipe, *, uv: str, env: Mapping[str, str]) -> str:
    """Resolve as compile_lock does, written by uv as PEP 751 (uv 0.13.9 calls the format experimental)."""
    body = without_credentials(resolve(plan, recipe, uv=uv, env=env, extra=["--format", "pylock.toml"]))
    return render_pylock(lock_fields(plan, recipe, uv=uv), body)


def write_lock(path: Path, text: str) -> None:
    """Write the lock atomically: a failed run leaves no lock file behind (and keeps an old one)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InstallError(f"cannot write {path}: {exc.strerror or exc}") from exc

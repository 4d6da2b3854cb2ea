"""Hashed lock files: resolve a row for its target Python and platform, write, read and check.

A lock is `uv pip compile --generate-hashes` output under a header that names the row, the
matrix and uv, sealed by the sha256 of every other line, header and body: `install --lock` refuses
a lock edited after it was written (a row, Python or index-url line as much as a pin) before
anything changes, and uv refuses any file whose hash differs from the lock's. No timestamps: the same
row, matrix and index give the same bytes.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from packaging.utils import canonicalize_name, parse_wheel_filename

from verl_setup.errors import BadInputError, InstallError
from verl_setup.plan.select import Plan

if TYPE_CHECKING:
    from verl_setup.plan.recipe import Choice, ExtensionRequests, Recipe

FORMAT_LINE = "# verl-setup lock, format 3: install with `verl-setup install --lock FILE`; do not edit"
_FORMAT_RE = re.compile(r"^# verl-setup lock, format (\d+):")
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
# Written only when the row builds more than flash-attn against torch: "name=mode version, ...".
_OPTIONAL_KEYS = ("torch-extensions",)
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
    """The lock text: header, then uv's output unchanged, sealed by the header's last line."""
    keys = (*_KEYS, *(k for k in _OPTIONAL_KEYS if k in fields))
    header = "".join(f"{line}\n" for line in (FORMAT_LINE, *(f"# {key}: {fields[key]}" for key in keys)))
    return f"{header}# {SEAL}: {_digest(header + body)}\n{body}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def parse(text: str, path: Path) -> Lock:
    """Read a lock; BadInputError if it is not one, InstallError if it was altered."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\n") != FORMAT_LINE:
        old = _FORMAT_RE.match(lines[0]) if lines else None
        if old:
            raise BadInputError(
                f"{path}: a format {old[1]} lock, whose seal leaves its header open to edits: "
                "make it again with `verl-setup lock --out FILE`"
            )
        raise BadInputError(f"{path}: not a verl-setup lock (make one with `verl-setup lock --out FILE`)")
    fields: dict[str, str] = {}
    index = 1  # the first body line, after the seal
    for line in lines[1:]:
        m = re.match(r"^# ([a-z0-9-]+): (.*)$", line.rstrip("\n"))
        if m is None or m[1] in fields or m[1] not in (*_KEYS, *_OPTIONAL_KEYS, SEAL):
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
            pins.append(Pin(name=canonicalize_name(name), version=version.public))
    if not pins:
        raise BadInputError(f"{path}: the lock pins no distributions")
    return Lock(path=path, fields=fields, pins=tuple(pins))


def read_lock(path: Path) -> Lock:
    """Read and check a lock file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"cannot read lock {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    return parse(text, path)


def compile_lock(plan: Plan, recipe: Recipe, *, uv: str, env: Mapping[str, str]) -> str:
    """Resolve the recipe's pins with hashes for its Python and platform; return the lock text.

    flash-attn goes in as its prebuilt wheel (uv hashes the file it downloads), so the lock
    installs as it stands; a flash-attn to be built is left out and named in the header.
    """
    from verl_setup.environment.uv import (  # noqa: PLC0415
        compile_command,
        explain_failure,
        python_platform,
        uv_version,
        write_inputs,
    )
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    row, fa = plan.row, recipe.flash_attn
    final = recipe.step("verl")
    requirements = list(final.requirements if final else row.requirements())
    requirements += [e.requirement for e in recipe.extensions if e.mode == "wheel"]
    with tempfile.TemporaryDirectory(prefix="verl-setup-lock-") as tmp:
        _, overrides = write_inputs(row, Path(tmp), requirements)
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
        )
        try:
            out = run(argv, timeout=COMPILE_TIMEOUT_S, env=env, cwd=tmp)
        except ProgramError as exc:
            raise InstallError(f"uv pip compile: {exc}") from exc
    if out.returncode != 0:
        raise InstallError(
            f"row {row.id} does not resolve for Python {plan.python}: {explain_failure(out.stderr)}"
        )
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
    return render(fields, out.stdout)


def write_lock(path: Path, text: str) -> None:
    """Write the lock atomically: a failed run leaves no lock file behind (and keeps an old one)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InstallError(f"cannot write {path}: {exc.strerror or exc}") from exc

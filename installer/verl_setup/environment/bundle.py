"""An offline bundle: one lock's every file, checked by sha256, for an install with no network.

    DIR/bundle.json            the manifest (below); written last, so a folder without it is not a bundle
    DIR/verl.lock              the lock itself, sealed as `verl-setup lock` wrote it
    DIR/sync.txt               the lock with its wheel URLs as `name==version` (only when it has any)
    DIR/wheels/                every distribution file of the lock, and the wheels its sdists build with
    DIR/python/NAME.tar        a uv-managed Python build, when the bundling machine had one

bundle_make.py writes one; `install --offline DIR` reads it here: every file's sha256 is checked
before anything changes, then uv runs with --offline --no-index --find-links DIR/wheels.
"""

from __future__ import annotations

import os
import re
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion

from verl_setup.errors import BadInputError, InstallError
from verl_setup.output import Progress
from verl_setup.util.bounded import BoundError, loads_json, one_line, read_capped
from verl_setup.util.wheelhouse import sha256_of

KIND = "verl-setup-bundle"
SCHEMA = 1
MANIFEST = "bundle.json"
LOCK = "verl.lock"
SYNC = "sync.txt"
WHEELS = "wheels"
PYTHON = "python"
MAX_MANIFEST = 4 * 2**20
_URL_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*) @ (\S+\.whl)(\s*\\?)$")


@dataclass(frozen=True, kw_only=True)
class BundleFile:
    """One file of a bundle: its path inside, sha256, size, and why it is there (lock, build)."""

    path: str
    sha256: str
    size: int
    role: str

    def to_json(self) -> dict[str, Any]:
        """The manifest's entry."""
        return {"path": self.path, "sha256": self.sha256, "size": self.size, "role": self.role}


@dataclass(frozen=True, kw_only=True)
class Bundle:
    """A bundle folder and its manifest (not yet checked against the files)."""

    root: Path
    data: dict[str, Any]
    files: tuple[BundleFile, ...]

    @property
    def lock(self) -> Path:
        """The bundled lock."""
        return self.root / LOCK

    @property
    def sync_file(self) -> Path:
        """What uv syncs from: the lock, or its copy with local names for the wheel URLs."""
        return self.root / SYNC if self.data.get("sync") else self.lock

    @property
    def wheels(self) -> Path:
        """uv's --find-links folder."""
        return self.root / WHEELS

    @property
    def python_build(self) -> BundleFile | None:
        """The bundled Python build (a tar of uv's folder for it), if the bundle has one."""
        return next((f for f in self.files if f.role == "python"), None)

    @property
    def row(self) -> str:
        """The row the bundled lock was made from."""
        return str(self.data["row"])


def sync_text(lock_text: str) -> str | None:
    """The lock with each wheel URL pin (`flash-attn @ https://...whl`) as `name==version`, so
    uv takes the file from --find-links; None when the lock has no such pin."""
    lines, changed = [], False
    for line in lock_text.splitlines(keepends=True):
        m = _URL_PIN.match(line.rstrip("\n"))
        if m:
            _, version, _, _ = parse_wheel_filename(unquote(m[2].rsplit("/", 1)[-1]))
            changed = True
        lines.append(f"{m[1]}=={version}{m[3]}\n" if m else line)
    return "".join(lines) if changed else None


def read_bundle(root: Path) -> Bundle:
    """Read a bundle's manifest; BadInputError, in one line, when `root` is not a bundle."""
    path = root / MANIFEST
    if not root.is_dir():
        raise BadInputError(f"{root}: no such bundle folder (make one with `verl-setup bundle --out DIR`)")
    if not path.exists():
        raise BadInputError(
            f"{root} is not a bundle (no {MANIFEST}: an interrupted `verl-setup bundle` leaves none)"
        )
    try:
        data = loads_json(read_capped(path, MAX_MANIFEST, "bundle manifest"), f"bundle manifest {path}")
    except BoundError as exc:
        raise BadInputError(str(exc)) from exc
    except ValueError as exc:
        raise BadInputError(f"{path}: not a bundle manifest ({one_line(str(exc))})") from exc
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise BadInputError(f"{path}: not a verl-setup bundle manifest")
    if data.get("schema") != SCHEMA:
        raise BadInputError(
            f"{path}: bundle schema {one_line(repr(data.get('schema')), 40)}, this verl-setup reads {SCHEMA}"
        )
    try:
        files = _shapes(data)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise BadInputError(f"{path}: malformed bundle manifest ({one_line(repr(exc), 120)})") from exc
    for f in files:
        if Path(f.path).is_absolute() or ".." in Path(f.path).parts:
            raise BadInputError(f"{path}: a file outside the bundle ({f.path})")
    return Bundle(root=root, data=data, files=files)


def _shapes(data: dict[str, Any]) -> tuple[BundleFile, ...]:
    """The manifest's files, once every field read later has its type (TypeError otherwise)."""
    if not isinstance(data["row"], str):
        raise TypeError("row is not a string")
    for key in ("lock", "python_build", "sync"):
        if not isinstance(data.get(key), (dict, type(None))):
            raise TypeError(f"{key} is not an object")
    if not isinstance((data.get("lock") or {}).get("sha256", ""), str):
        raise TypeError("lock.sha256 is not a string")
    return tuple(_file(f) for f in data["files"])


def _file(entry: object) -> BundleFile:
    if not isinstance(entry, dict):
        raise TypeError("a file entry is not an object")
    size = entry["size"]
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size < 2**50:
        raise ValueError(f"size {one_line(repr(size), 40)} is not a byte count")
    return BundleFile(
        path=str(entry["path"]), sha256=str(entry["sha256"]), size=size, role=str(entry["role"])
    )


def check_bundle(bundle: Bundle, status: Callable[[str], None]) -> None:
    """Every file the manifest lists is there with its sha256, and nothing else sits in wheels/
    (uv would take it from --find-links); InstallError naming the first bad file."""
    total = sum(f.size for f in bundle.files)
    done = 0

    def count(n: int) -> None:
        nonlocal done
        done += n
        status(f"checking the bundle's sha256s: {done / 2**30:.2f} of {total / 2**30:.2f} GiB")

    listed = {f.path for f in bundle.files}
    for f in bundle.files:
        path = bundle.root / f.path
        try:
            got = sha256_of(path, count)
        except FileNotFoundError:
            raise InstallError(
                f"{bundle.root}: {f.path} is missing from the bundle; nothing was changed"
            ) from None
        except OSError as exc:
            raise InstallError(f"cannot read {path}: {exc.strerror or exc}; nothing was changed") from exc
        if got != f.sha256:
            raise InstallError(
                f"{path}: sha256 {got} is not the bundle's {f.sha256} (the file was altered or "
                "damaged in transit); nothing was changed"
            )
    try:
        extra = sorted(p.name for p in bundle.wheels.iterdir() if f"{WHEELS}/{p.name}" not in listed)
    except OSError:
        extra = []
    if extra:
        raise InstallError(
            f"{bundle.wheels}: {one_line(extra[0], 200)} is not in the bundle's manifest; nothing was changed"
        )
    lock_sha = sha256_of(bundle.lock) if bundle.lock.is_file() else None
    if lock_sha != (bundle.data.get("lock") or {}).get("sha256"):
        raise InstallError(f"{bundle.lock} is not the lock the bundle was made from; nothing was changed")
    _check_sync(bundle)


def _check_sync(bundle: Bundle) -> None:
    """uv installs from sync.txt when the bundle has one: it must be exactly what the sealed lock
    gives (sync_text), whatever the manifest says of it, or one appended line installs anything."""
    sync = bundle.root / SYNC
    try:
        lock_text = read_capped(bundle.lock, MAX_MANIFEST * 4, "bundled lock").decode("utf-8")
        expected = sync_text(lock_text)
        found = (
            read_capped(sync, MAX_MANIFEST * 4, "bundle sync file").decode("utf-8")
            if bundle.data.get("sync")
            else None
        )
    except (BoundError, UnicodeDecodeError, InvalidWheelFilename, InvalidVersion) as exc:
        raise InstallError(f"{one_line(str(exc))}; nothing was changed") from exc
    if found != expected:
        raise InstallError(
            f"{sync} is not what the bundle's lock gives (the lock's pins with its wheel URLs as "
            "names): edited after bundling; nothing was changed"
        )


def place_python(bundle: Bundle, python_dir: Path, say: Callable[[str], None]) -> Path | None:
    """Unpack the bundled Python build into uv's Python folder (where uv and detection find
    managed Pythons), unless a build of that name is already there; its folder, or None."""
    build = bundle.python_build
    if build is None:
        return None
    name = Path(build.path).name.removesuffix(".tar")
    target = python_dir / name
    if target.exists():
        return target
    partial = python_dir / f".{name}.partial-{os.getpid()}"
    try:
        python_dir.mkdir(parents=True, exist_ok=True)
        with tarfile.open(bundle.root / build.path) as tar:
            # "data" refuses links and paths that leave the folder (Python 3.10.12+, 3.11.4+)
            if hasattr(tarfile, "data_filter"):
                tar.extractall(partial, filter="data")
            else:  # pragma: no cover  # an older 3.10: the sha256 was checked, the tar is ours
                tar.extractall(partial)  # noqa: S202
        (partial / name).rename(target)
    except (OSError, tarfile.TarError) as exc:
        raise InstallError(f"cannot unpack the bundled Python into {python_dir}: {exc}") from exc
    finally:
        if partial.exists():
            from verl_setup.environment.staging import remove_tree  # noqa: PLC0415

            remove_tree(partial)
    say(f"unpacked the bundled Python {name} into {python_dir}")
    return target


def offline_env(env: Mapping[str, str], bundle: Bundle) -> dict[str, str]:
    """The user's environment for an install from a bundle: no index of any kind reaches uv."""
    out = {
        k: v
        for k, v in env.items()
        if k not in ("UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS")
    }
    out.update({"UV_OFFLINE": "1", "UV_NO_INDEX": "1", "UV_PYTHON_DOWNLOADS": "never"})
    out["UV_FIND_LINKS"] = str(bundle.wheels)
    return out


def offline_flags(bundle: Bundle) -> list[str]:
    """uv's flags for an install from the bundle alone (also in the printed commands)."""
    return ["--offline", "--no-index", "--find-links", str(bundle.wheels)]


def open_bundle(root: Path, env: Mapping[str, str], progress: Progress) -> tuple[Bundle, dict[str, str]]:
    """For `install --offline`: the bundle, every file checked, its Python where uv finds it, and
    the environment that keeps uv off every index."""
    from verl_setup.host.pythons import uv_python_dir  # noqa: PLC0415

    bundle = read_bundle(root.expanduser().absolute())
    progress.step("bundle", f"{bundle.root}: row {bundle.row}, {len(bundle.files)} files")
    check_bundle(bundle, progress.status)
    offline = offline_env(env, bundle)
    if bundle.python_build is not None:
        home = Path(offline.get("HOME") or Path.home())
        place_python(bundle, uv_python_dir(home, offline), progress.say)
    else:
        note = (bundle.data.get("python_build") or {}).get("note", "")
        progress.say(f"the bundle carries no Python: {one_line(str(note))}")
    return bundle, offline

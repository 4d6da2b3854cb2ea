"""`verl-setup bundle`: gather a lock's every file (and a Python build) into an offline bundle.

uv has no `pip download` (astral-sh/uv#3163), so uv names the files: `uv pip compile LOCK
--no-deps --format pylock.toml` lists, for the lock's own Python and platform, each pin's files
with their URLs and sha256 (PEP 751), through the user's uv configuration (mirrors, credentials).
A file is taken only when the lock names its sha256, and its bytes are hashed again as they
arrive. The folder is built beside DIR and swapped in whole (staging.py), so an interrupted or
failed run leaves DIR as it was; files an earlier bundle in DIR already holds are reused.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import sys
import tarfile
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from packaging.utils import canonicalize_name, parse_wheel_filename

from verl_setup import __version__
from verl_setup.environment.bundle import (
    KIND,
    LOCK,
    MANIFEST,
    PYTHON,
    SCHEMA,
    SYNC,
    WHEELS,
    BundleFile,
    read_bundle,
    sync_text,
)
from verl_setup.environment.fetch import Wanted, fetch
from verl_setup.environment.install import sigterm_unwinds
from verl_setup.environment.lock import Lock, parse
from verl_setup.environment.staging import Layout, clean_leftovers, install_lock, remove_tree, swap
from verl_setup.errors import BadInputError, InstallError, Stopped
from verl_setup.output import Progress
from verl_setup.util.wheelhouse import sha256_of

COMPILE_TIMEOUT_S = 900.0
DOWNLOAD_TIMEOUT_S = 120.0  # between two blocks, not for a whole file
DOWNLOADERS = 4
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
# What an sdist without [build-system] builds with (PEP 517's fallback, as uv reads it).
DEFAULT_BUILD_REQUIRES = ("setuptools>=40.8.0",)


def files_from_pylock(text: str, *, only: set[str] | None, role: str) -> list[Wanted]:
    """The files of a PEP 751 lock uv wrote: for each package its wheels (else its sdist or
    archive) whose sha256 is in `only` (None: all of them)."""
    doc = _toml(text)
    out = []
    for package in doc.get("packages", []):
        wheels = [_wanted(w, role) for w in package.get("wheels", [])]
        others = [_wanted(package[k], role) for k in ("sdist", "archive") if k in package]
        for group in (wheels, others):
            chosen = [w for w in group if w is not None and (only is None or w.sha256 in only)]
            if chosen:
                out += chosen
                break
        else:
            raise InstallError(
                f"{package.get('name')} {package.get('version')}: none of the files the index serves for "
                "the lock's Python and platform has a sha256 the lock names (a re-upload?)"
            )
    return out


def _wanted(entry: Mapping[str, Any], role: str) -> Wanted | None:
    sha = (entry.get("hashes") or {}).get("sha256")
    url = entry.get("url") or (Path(entry["path"]).absolute().as_uri() if entry.get("path") else None)
    if not sha or not url:
        return None
    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    return Wanted(name=name, url=url, sha256=str(sha), size=entry.get("size"), role=role)


def _toml(text: str) -> dict[str, Any]:
    """TOML as a dict; ValueError (TOMLDecodeError) when it is not TOML."""
    if sys.version_info >= (3, 11):
        import tomllib  # noqa: PLC0415
    else:  # Python 3.10 reads TOML with tomli (a dependency there)
        import tomli as tomllib  # noqa: PLC0415
    data: dict[str, Any] = tomllib.loads(text)
    return data


@dataclass(frozen=True, kw_only=True)
class BundleJob:
    """What to bundle: the lock, where, with which uv and environment."""

    lock_text: str
    out: Path
    uv: str
    uv_env: Mapping[str, str]
    python_build: bool = True
    wait_s: float = 600.0


def make_bundle(job: BundleJob, progress: Progress) -> dict[str, Any]:
    """Build the bundle beside `job.out` and swap it in; the manifest written."""
    lock = parse(job.lock_text, Path(LOCK))
    layout = Layout(prefix=job.out.expanduser().absolute())
    _replaceable(layout.prefix)
    staging, swapped = layout.staging(os.getpid()), False
    try:
        with sigterm_unwinds(), install_lock(layout, wait_s=job.wait_s, say=progress.say):
            clean_leftovers(layout, progress.say)
            try:
                manifest = _fill(job, lock, layout, staging, progress)
                progress.step("swap", f"moving the bundle into {layout.prefix}")
                swap(staging, layout, check=_is_bundle)
                swapped = True
            except OSError as exc:
                raise InstallError(_os_error(layout, exc)) from exc
            finally:
                if staging.exists():
                    remove_tree(staging)
    except (KeyboardInterrupt, Stopped) as exc:
        signum = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
        kept = (
            "the bundle is complete"
            if swapped
            else f"{layout.prefix} is as it was (the partial bundle was removed)"
        )
        raise Stopped(signum, f"interrupted by {signal.Signals(signum).name}: {kept}") from None
    size = sum(f["size"] for f in manifest["files"])
    progress.step("done", f"bundle {layout.prefix}: {len(manifest['files'])} files, {size / 2**30:.2f} GiB")
    return {"out": str(layout.prefix), **manifest}


def _replaceable(out: Path) -> None:
    """DIR is replaced whole: only an earlier bundle or an empty folder may be there."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_dir() and not out.is_symlink() and ((out / MANIFEST).is_file() or not any(out.iterdir())):
        return
    raise BadInputError(
        f"{out} exists and is not a bundle: a bundle replaces its folder whole, so give a new or empty folder"
    )


def _is_bundle(root: Path) -> None:
    read_bundle(root)


def _fill(job: BundleJob, lock: Lock, layout: Layout, staging: Path, progress: Progress) -> dict[str, Any]:
    from verl_setup.environment.uv import uv_version  # noqa: PLC0415

    (staging / WHEELS).mkdir(parents=True)
    (staging / LOCK).write_text(job.lock_text, encoding="utf-8")
    progress.step(
        "files",
        f"asking uv for the files of {len(lock.pins)} pins (Python {lock.python}, {lock.fields['platform']})",
    )
    wanted = files_from_pylock(
        _pylock(job, lock, staging / LOCK, extra=()), only=set(_HASH.findall(job.lock_text)), role="lock"
    )
    missing = {p.name for p in lock.pins} - {_dist_name(w.name) for w in wanted}
    if missing:
        raise InstallError(
            f"uv names no file for {', '.join(sorted(missing))} of the lock; nothing was bundled"
        )
    reuse = _old_files(layout.prefix)
    fetch(wanted, staging / WHEELS, reuse, progress)
    sdists = [w for w in wanted if not w.name.endswith(".whl")]
    if sdists:
        requires = sorted({r for w in sdists for r in _build_requires(staging / WHEELS / w.name)})
        progress.step("build", f"wheels the lock's sdists build with: {', '.join(requires)}")
        builds = files_from_pylock(_pylock(job, lock, None, extra=requires), only=None, role="build")
        builds = [b for b in builds if b.sha256 not in {w.sha256 for w in wanted}]
        fetch(builds, staging / WHEELS, reuse, progress)
        wanted += builds
    files = [
        BundleFile(
            path=f"{WHEELS}/{w.name}",
            sha256=w.sha256,
            size=(staging / WHEELS / w.name).stat().st_size,
            role=w.role,
        )
        for w in wanted
    ]
    sync = sync_text(job.lock_text)
    if sync is not None:
        (staging / SYNC).write_text(sync, encoding="utf-8")
        # uv installs from sync.txt: the manifest lists it like any other file it reads
        files.append(
            BundleFile(path=SYNC, sha256=sha256_of(staging / SYNC), size=len(sync.encode()), role="lock")
        )
    python = _python_build(job, lock, staging, progress) if job.python_build else None
    if isinstance(python, BundleFile):
        files.append(python)
    manifest = {
        "kind": KIND,
        "schema": SCHEMA,
        "row": lock.row_id,
        "python": lock.python,
        "platform": lock.fields["platform"],
        "lock": {"path": LOCK, "sha256": sha256_of(staging / LOCK), "seal": lock.fields["sha256"]},
        "sync": None if sync is None else {"path": SYNC},
        "python_build": python.to_json()
        if isinstance(python, BundleFile)
        else {"path": None, "note": python},
        "tool": {"verl-setup": __version__, "uv": uv_version(job.uv)},
        "files": [f.to_json() for f in files],
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _dist_name(filename: str) -> str:
    if filename.endswith(".whl"):
        return canonicalize_name(parse_wheel_filename(filename)[0])
    from packaging.utils import parse_sdist_filename  # noqa: PLC0415

    return canonicalize_name(parse_sdist_filename(filename)[0])


def _pylock(
    job: BundleJob, lock: Lock, requirements: Path | None, *, extra: tuple[str, ...] | list[str]
) -> str:
    """uv's PEP 751 lock of `requirements` (exact pins: --no-deps), or of `extra` with their
    dependencies, for the lock's Python and platform."""
    from verl_setup.environment.uv import explain_failure, index_flags  # noqa: PLC0415
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="verl-setup-bundle-") as tmp:
        source = requirements
        if source is None:
            source = Path(tmp) / "requirements.in"
            source.write_text("".join(f"{r}\n" for r in extra), encoding="utf-8")
        argv = [
            job.uv, "pip", "compile", str(source), "--format", "pylock.toml", "-o", "pylock.bundle.toml",
            "--python-version", lock.python, "--python-platform", lock.fields["platform"],
            "--no-python-downloads", "--no-header", "--quiet",
            *(["--no-deps"] if requirements is not None else []),
            *index_flags(lock.index_url),
        ]  # fmt: skip
        try:
            out = run(argv, timeout=COMPILE_TIMEOUT_S, env=dict(job.uv_env), cwd=tmp)
        except ProgramError as exc:
            raise InstallError(f"uv pip compile: {exc}") from exc
        if out.returncode != 0:
            raise InstallError(f"uv could not list the lock's files: {explain_failure(out.stderr)}")
        return (Path(tmp) / "pylock.bundle.toml").read_text(encoding="utf-8")


def _build_requires(sdist: Path) -> list[str]:
    """An sdist's [build-system] requires (PEP 517's fallback when it has none)."""
    try:
        with tarfile.open(sdist) as tar:
            member = next(
                (
                    m
                    for m in tar.getmembers()
                    if m.isfile() and m.name.count("/") == 1 and m.name.endswith("/pyproject.toml")
                ),
                None,
            )
            data = tar.extractfile(member).read() if member else None  # type: ignore[union-attr]  # a file member
    except (OSError, tarfile.TarError) as exc:
        raise InstallError(f"{sdist.name}: cannot read the sdist ({exc})") from exc
    if data is None:
        return list(DEFAULT_BUILD_REQUIRES)
    try:
        requires = _toml(data.decode("utf-8")).get("build-system", {}).get("requires")
    except (ValueError, UnicodeDecodeError):
        requires = None
    return [str(r) for r in requires] if isinstance(requires, list) else list(DEFAULT_BUILD_REQUIRES)


def _old_files(root: Path) -> dict[str, Path]:
    """sha256 -> file of the bundle already at `root`, to reuse (hashed again when taken)."""
    try:
        old = read_bundle(root)
    except Exception:  # noqa: BLE001  # no bundle there (or a broken one): nothing to reuse
        return {}
    return {f.sha256: root / f.path for f in old.files if f.role != "python"}


def _python_build(job: BundleJob, lock: Lock, staging: Path, progress: Progress) -> BundleFile | str:
    """uv's own build of the lock's exact Python, as a tar of its folder; else why there is none."""
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    env = {**job.uv_env, "UV_PYTHON_DOWNLOADS": "never"}
    try:
        found = run(
            [job.uv, "python", "find", "--managed-python", "--no-project", lock.python], timeout=60, env=env
        )
        where = run([job.uv, "python", "dir"], timeout=60, env=env)
    except ProgramError as exc:
        return f"the target must provide Python {lock.python} (uv could not be asked: {exc})"
    root = Path(where.stdout.strip())
    exe = Path(found.stdout.strip())
    home = next((p for p in exe.parents if p.parent == root), None) if found.returncode == 0 else None
    if home is None:
        return (
            f"the target must provide Python {lock.python}: this machine has no uv-managed build of it "
            f"(`uv python install {lock.python}` here, then bundle again, puts one in the bundle)"
        )
    progress.step("python", f"packing uv's Python build {home.name}")
    tar_path = staging / PYTHON / f"{home.name}.tar"
    tar_path.parent.mkdir()
    with tarfile.open(tar_path, "w") as tar:
        tar.add(home, arcname=home.name)
    return BundleFile(
        path=f"{PYTHON}/{tar_path.name}",
        sha256=sha256_of(tar_path),
        size=tar_path.stat().st_size,
        role="python",
    )


def _os_error(layout: Layout, exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return (
            f"no space left on the filesystem of {layout.parent}: the bundle is built beside "
            f"{layout.prefix.name} and needs room of its own; {layout.prefix} is as it was"
        )
    return f"{exc.filename or layout.prefix}: {exc.strerror or exc}; {layout.prefix} is as it was"

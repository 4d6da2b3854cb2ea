"""Which uv binary we run: the one our `uv` dependency ships, else uv on PATH, in the tested range."""

from __future__ import annotations

import functools
import re
import shutil
import sys
from importlib.util import find_spec
from pathlib import Path

from verl_setup.errors import InstallError
from verl_setup.util.versions import minor_of

# The uv versions this release is tested with (pyproject's `uv>=0.13,<0.14`; the locks record the
# version, and the error classification reads its messages). Older uv lacks what the code uses:
# `pip compile --format pylock.toml` (0.6.15), `python find --managed-python`, pylock's
# requires-python (0.8); uv 0.5.31 failed `lock --format pylock` as "row cpu does not resolve".
TESTED_UV = (0, 13)
_VERSION = re.compile(r"^uv (\d+)\.(\d+)\.(\d+)")
_KNOWN: dict[str, str] = {}  # binary -> the version find_uv learned for it (no `uv --version` again)


def find_uv() -> str:
    """The uv binary: the one shipped with our `uv` dependency, else uv on PATH (either one
    outside the tested range is refused in one line naming the version needed)."""
    try:
        found = _in_this_venv() or _find_uv_bin()
    except (ImportError, FileNotFoundError):
        path = shutil.which("uv")
        if path is None:
            raise InstallError("uv not found: install it with `python3 -m pip install uv`") from None
        _KNOWN[path] = path_version(path)
        check_version(path, _KNOWN[path])
        return path
    version = bundled_uv()
    if version == "none":
        from importlib import metadata  # noqa: PLC0415

        version = metadata.version("uv")
    _KNOWN[found] = version  # the wheel's version is its binary's: no program run
    check_version(found, version)
    return found


def _find_uv_bin() -> str:
    from uv import find_uv_bin  # noqa: PLC0415  # only needed when we actually run uv

    return str(find_uv_bin())


def _in_this_venv() -> str | None:
    """In a venv with our `uv` package, its bin/uv: the first place uv's own find_uv_bin looks
    (the venv scheme's scripts folder), found without importing it (its sysconfig read costs
    about 10 ms of every install's start)."""
    if sys.platform == "win32" or sys.prefix == sys.base_prefix or find_spec("uv") is None:
        return None
    exe = Path(sys.prefix) / "bin" / "uv"
    return str(exe) if exe.is_file() else None


def bundled_uv() -> str:
    """The version of the uv our `uv` dependency ships ("none": uv on PATH is used), from its
    dist-info folder's name: importlib.metadata would cost -V about 50 ms."""
    spec = find_spec("uv")
    if spec is None or spec.origin is None:
        return "none"
    found = sorted(Path(spec.origin).parent.parent.glob("uv-*.dist-info"))
    return found[-1].name.removeprefix("uv-").removesuffix(".dist-info") if found else "none"


def known_version(uv: str) -> str | None:
    """The version find_uv learned for this binary, if it was the one found."""
    return _KNOWN.get(uv)


@functools.lru_cache(maxsize=8)
def path_version(uv: str) -> str:
    """`uv --version` of a uv found on PATH, once per binary."""
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    try:
        text = run([uv, "--version"], timeout=30).stdout.strip()
    except ProgramError as exc:
        raise InstallError(f"{uv} --version failed: {exc}") from exc
    match = _VERSION.match(text)
    if match is None:
        raise InstallError(f"{uv} --version printed {text[:80]!r}, not `uv X.Y.Z`")
    return ".".join(match.groups())


def check_version(uv: str, version: str) -> None:
    """InstallError, in one line naming the range needed, for a uv outside TESTED_UV."""
    major, minor = (int(x) for x in minor_of(version).split("."))
    if (major, minor) != TESTED_UV:
        needed = ".".join(map(str, TESTED_UV))
        raise InstallError(
            f"{uv} is uv {version}; verl-setup needs uv {needed}.x"
            f" (python3 -m pip install 'uv>={needed},<0.{TESTED_UV[1] + 1}')"
        )

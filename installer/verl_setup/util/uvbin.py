"""Which uv binary we run: the one our `uv` dependency ships, else uv on PATH, in the tested range."""

from __future__ import annotations

import functools
import re
import shutil

from verl_setup.errors import InstallError
from verl_setup.util.versions import minor_of

# The uv versions this release is tested with (pyproject's `uv>=0.13,<0.14`; the locks record the
# version, and the error classification reads its messages). Older uv lacks what the code uses:
# `pip compile --format pylock.toml` (0.6.15), `python find --managed-python`, pylock's
# requires-python (0.8); uv 0.5.31 failed `lock --format pylock` as "row cpu does not resolve".
TESTED_UV = (0, 13)
_VERSION = re.compile(r"^uv (\d+)\.(\d+)\.(\d+)")


def find_uv() -> str:
    """The uv binary: the one shipped with our `uv` dependency, else uv on PATH (either one
    outside the tested range is refused in one line naming the version needed)."""
    try:
        from uv import find_uv_bin  # noqa: PLC0415  # only needed when we actually run uv

        found = str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        path = shutil.which("uv")
        if path is None:
            raise InstallError("uv not found: install it with `python3 -m pip install uv`") from None
        check_version(path, path_version(path))
        return path
    from importlib import metadata  # noqa: PLC0415

    check_version(found, metadata.version("uv"))  # the wheel's version is its binary's: no program run
    return found


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

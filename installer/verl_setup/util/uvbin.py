"""Which uv binary we run: the one our `uv` dependency ships, else uv on PATH."""

from __future__ import annotations

import shutil

from verl_setup.errors import InstallError


def find_uv() -> str:
    """The uv binary: the one shipped with our `uv` dependency, else uv on PATH."""
    try:
        from uv import find_uv_bin  # noqa: PLC0415  # only needed when we actually run uv

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
    if found is None:
        raise InstallError("uv not found: install it with `python3 -m pip install uv`")
    return found

"""Binary-only installs: the uv options that take wheels only, except the sdists built on purpose."""

from __future__ import annotations

from collections.abc import Sequence


def binary_only(sdists: Sequence[str]) -> list[str]:
    """uv's options for a binary-only install or resolution: wheels for everything except the
    packages named, which are built from their sdist on purpose (`--no-binary` lets uv build
    exactly those while `--only-binary :all:` refuses every other sdist)."""
    argv = ["--only-binary", ":all:"]
    for name in sdists:
        argv += ["--no-binary", name]
    return argv

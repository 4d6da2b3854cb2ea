"""uv as we drive it: find the binary, and build the resolver command for a matrix row."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from verl_setup.errors import InstallError
from verl_setup.matrix.load import Matrix
from verl_setup.matrix.schema import Row

# Resolve for at least manylinux_2_28: older-glibc rows still install the same wheels there, and
# it is the platform torch >= 2.7 publishes for.
MIN_MANYLINUX = (2, 28)


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


def python_platform(row: Row) -> str:
    """uv's --python-platform for a row: its architecture and glibc floor."""
    major, minor = (int(p) for p in row.requires.glibc.split("."))
    major, minor = max((major, minor), MIN_MANYLINUX)
    return f"{row.requires.arch[0]}-manylinux_{major}_{minor}"


def write_inputs(row: Row, folder: Path) -> tuple[Path, Path | None]:
    """requirements.in (and overrides.txt when the row has overrides) for uv."""
    folder.mkdir(parents=True, exist_ok=True)
    requirements = folder / "requirements.in"
    requirements.write_text("\n".join(row.requirements()) + "\n", encoding="utf-8")
    overrides = None
    if row.overrides:
        overrides = folder / "overrides.txt"
        overrides.write_text("\n".join(row.overrides) + "\n", encoding="utf-8")
    return requirements, overrides


def compile_command(
    uv: str,
    *,
    row: Row,
    matrix: Matrix,
    python: str,
    requirements: Path,
    overrides: Path | None,
    hashes: bool = False,
) -> list[str]:
    """`uv pip compile` for the row's target Python and platform, from any machine."""
    argv = [
        uv, "pip", "compile", str(requirements),
        "--python-version", python,
        "--python-platform", python_platform(row),
        "--no-python-downloads",
        "--no-header",
        "--quiet",
    ]  # fmt: skip
    if overrides is not None:
        argv += ["--override", str(overrides)]
    index = matrix.index_url(row)
    if index is not None:
        # The row's torch lives on that index; the rest stays on the user's default index.
        argv += ["--extra-index-url", index, "--index-strategy", "unsafe-best-match"]
    if hashes:
        argv.append("--generate-hashes")
    return argv


def uv_env() -> dict[str, str]:
    """The environment for uv: never download a Python interpreter behind the user's back."""
    return {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}

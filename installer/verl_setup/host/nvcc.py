"""The nvcc a build would compile with and its CUDA release: where it was found (CUDA_HOME,
CUDA_PATH, PATH, /usr/local/cuda), and the release `nvcc --version` prints."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

_RELEASE = re.compile(r"release (\d+)\.(\d+), V([0-9.]+)")


def nvcc_release(nvcc: Path, env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """("13.0", "13.0.88") from `nvcc --version`, or None when it cannot say."""
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415  # `plan` starts without it

    try:
        out = run([str(nvcc), "--version"], timeout=60, env=env)
    except ProgramError:
        return None
    found = _RELEASE.search(out.stdout)
    return (f"{found[1]}.{found[2]}", found[3]) if out.returncode == 0 and found else None


def build_nvcc(env: Mapping[str, str]) -> Path | None:
    """The nvcc a build would run: CUDA_HOME's (or CUDA_PATH's) bin/nvcc, else PATH's."""
    home = env.get("CUDA_HOME") or env.get("CUDA_PATH")
    if home and (Path(home) / "bin" / "nvcc").exists():
        return Path(home) / "bin" / "nvcc"
    on_path = shutil.which("nvcc", path=env.get("PATH", os.defpath))
    return Path(on_path) if on_path else None


def nvcc_version(env: Mapping[str, str]) -> str | None:
    """The CUDA release of the nvcc a build would use (build_nvcc), e.g. "13.0"."""
    nvcc = build_nvcc(env)
    found = nvcc_release(nvcc, env) if nvcc else None
    return found[0] if found else None


def toolkit_homes(cuda: str, env: Mapping[str, str]) -> list[tuple[Path, str]]:
    """The CUDA_HOMEs a build of CUDA `cuda` could use, in order, each with where it was found:
    CUDA_HOME, CUDA_PATH, the nvcc on PATH's folder, /usr/local/cuda-`cuda`, /usr/local/cuda."""
    candidates: list[tuple[Path, str]] = []
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(variable):
            candidates.append((Path(env[variable]), variable))
    on_path = shutil.which("nvcc", path=env.get("PATH", os.defpath))
    if on_path:
        candidates.append((Path(on_path).resolve().parent.parent, "nvcc on PATH"))
    candidates.append((Path(f"/usr/local/cuda-{cuda}"), f"/usr/local/cuda-{cuda}"))
    candidates.append((Path("/usr/local/cuda"), "/usr/local/cuda"))
    return candidates


def has_headers(home: Path) -> bool:
    """Whether CUDA_HOME=`home` gives a compiler cuda_runtime_api.h."""
    return any(
        (home / sub / "cuda_runtime_api.h").is_file()
        for sub in ("include", "targets/x86_64-linux/include", "targets/sbsa-linux/include")
    )

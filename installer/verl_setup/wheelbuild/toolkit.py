"""The CUDA toolkit a build compiles with: the host's when its nvcc is torch's CUDA major, else
nvcc, ptxas, nvlink, fatbinary and the headers from NVIDIA's PyPI wheels, installed into the
scratch environment beside torch (no GPU and no system toolkit needed to compile)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verl_setup.errors import InstallError
from verl_setup.host.nvcc import has_headers, nvcc_release, toolkit_homes

# The parts of CUDA 13's `cuda-toolkit` meta-package a torch extension build needs: nvcc (with
# ptxas, nvlink, fatbinary), the crt and cccl headers, the runtime (headers and libcudart) and nvvm
# (cicc). torch's own Requires-Dist pins the same meta-package's version for its runtime libraries.
PYPI_PARTS = ("nvcc", "crt", "cccl", "cudart", "nvvm")
_TOOLKIT_PIN = re.compile(r"^cuda-toolkit(?:\[[^\]]*\])?\s*\(?==\s*([0-9][0-9.]*)", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class Toolkit:
    """A CUDA_HOME to build with."""

    home: Path
    release: str  # "13.0"
    version: str  # nvcc's full version, "13.0.88"
    source: str  # where it came from, for the manifest and the progress line
    extra_env: tuple[tuple[str, str], ...] = ()

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """`base` with CUDA_HOME and PATH pointing at this toolkit."""
        return {
            **base,
            **dict(self.extra_env),
            "CUDA_HOME": str(self.home),
            "PATH": f"{self.home / 'bin'}{os.pathsep}{base.get('PATH', '')}",
        }


def host_toolkit(cuda: str, env: Mapping[str, str]) -> Toolkit | None:
    """CUDA_HOME's, PATH's or /usr/local/cuda's toolkit when its nvcc is CUDA `cuda`'s major."""
    for home, source in toolkit_homes(cuda, env):
        nvcc = home / "bin" / "nvcc"
        # A wrapper script on PATH (`exec /usr/local/cuda-13.0/bin/nvcc "$@"`) is no CUDA_HOME: a
        # toolkit has the runtime headers beside its bin/ (torch's cpp_extension reads them there).
        if not nvcc.is_file() or not has_headers(home):
            continue
        found = nvcc_release(nvcc, env)
        if found and found[0].split(".")[0] == cuda.split(".", maxsplit=1)[0]:
            return Toolkit(
                home=home, release=found[0], version=found[1], source=f"the host's ({source}: {home})"
            )
    return None


def pypi_requirements(torch_requires: list[str], torch_version: str) -> list[str]:
    """What to install beside torch for a PyPI toolkit of torch's own CUDA version."""
    for line in torch_requires:
        found = _TOOLKIT_PIN.match(line.strip())
        if found:
            return [f"cuda-toolkit[{','.join(PYPI_PARTS)}]=={found[1]}"]
    raise InstallError(
        f"torch {torch_version} names no cuda-toolkit version (a CUDA 12 or CPU build): nvcc from PyPI "
        "is set up for CUDA 13 torches only; install the CUDA toolkit of torch's CUDA and pass "
        "--nvcc host (CUDA_HOME or nvcc on PATH)"
    )


def pypi_toolkit(site_packages: Path, cuda: str, env: Mapping[str, str]) -> Toolkit:
    """The CUDA_HOME that NVIDIA's wheels make under site-packages/nvidia/cuN, made linkable.

    The wheels ship libcudart.so.N only and a lib/ folder; torch's cpp_extension links -lcudart
    from CUDA_HOME/lib64, so the scratch copy gets the unversioned link and lib64 a real toolkit has.
    """
    major = cuda.split(".", maxsplit=1)[0]
    home = site_packages / "nvidia" / f"cu{major}"
    nvcc = home / "bin" / "nvcc"
    if not nvcc.is_file():
        raise InstallError(f"the PyPI toolkit has no {nvcc}: its wheels did not install as expected")
    runtime = home / "lib" / f"libcudart.so.{major}"
    if runtime.exists() and not (home / "lib" / "libcudart.so").exists():
        (home / "lib" / "libcudart.so").symlink_to(runtime.name)
    if not (home / "lib64").exists():
        (home / "lib64").symlink_to("lib")
    found = nvcc_release(nvcc, env)
    if found is None:
        raise InstallError(f"{nvcc} --version failed: the PyPI toolkit cannot run here")
    # TransformerEngine's build reads the headers of every nvidia/* wheel (cuDNN's among them) only
    # when told to (transformer_engine_torch 2.16.1 sdist, build_tools/utils.py get_cuda_include_dirs).
    return Toolkit(
        home=home,
        release=found[0],
        version=found[1],
        source="PyPI (cuda-toolkit wheels)",
        extra_env=(("NVTE_BUILD_USE_NVIDIA_WHEELS", "1"),),
    )

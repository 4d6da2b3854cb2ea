"""Probes for the operating system, container, CUDA toolkits, tools and environment variables."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
from pathlib import Path

from verl_setup.host.distribution import read_distribution
from verl_setup.host.facts import Container, CudaToolkit, OsFacts, Tool
from verl_setup.util.runner import ProgramError, run
from verl_setup.util.secrets import is_secret_name, mask

TOOL_TIMEOUT = 5.0

# Variables that change how verl, CUDA, Ray, Hugging Face or uv behave. Never a credential
# (util.secrets.is_secret_name).
ENV_NAMES = (
    "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_REQUIRE_CUDA", "HF_HOME", "HF_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_HUB_OFFLINE",
    "HF_ENDPOINT", "RAY_ADDRESS", "RAY_TMPDIR", "VLLM_USE_V1", "VLLM_ATTENTION_BACKEND",
    "VLLM_WORKER_MULTIPROC_METHOD", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_P2P_DISABLE",
    "TOKENIZERS_PARALLELISM", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX",
    "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH",
    "PYENV_ROOT", "PYENV_VERSION",
)  # fmt: skip
_ENV_PREFIXES = ("VERL_SETUP_", "VLLM_", "NCCL_", "GLOO_", "SGLANG_")  # every variable of these families


def os_facts(root: Path) -> OsFacts:
    """Distribution from os-release, lsb_release or the older release files (host/distribution.py),
    kernel and arch from uname, glibc from confstr; `source` names each fact's source."""
    release = read_distribution(root)
    glibc = None
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""  # "glibc 2.36"
        glibc = libc.split()[1] if libc.startswith("glibc ") else None
    except (ValueError, OSError):
        glibc = None
    named = {"id": "distro", "version": "distro_version", "codename": "codename", "like": "like"}
    by_source: dict[str, list[str]] = {}
    for fact, source in release.sources.items():
        by_source.setdefault(source, []).append(named[fact])
    by_source |= {"uname": ["kernel", "arch"], "confstr(CS_GNU_LIBC_VERSION)": ["glibc"]}
    return OsFacts(
        distro=release.id,
        distro_version=release.version,
        codename=release.codename,
        like=release.like,
        kernel=platform.release(),
        glibc=glibc,
        arch=platform.machine(),
        source="; ".join(f"{', '.join(facts)}: {source}" for source, facts in by_source.items()),
    )


def container(root: Path, env: dict[str, str]) -> Container:
    """Docker, podman or Kubernetes, from the marker files and the cgroup of PID 1."""
    if "KUBERNETES_SERVICE_HOST" in env:
        return Container(kind="k8s", evidence="KUBERNETES_SERVICE_HOST is set")
    if (root / "run/.containerenv").exists():
        return Container(kind="podman", evidence="/run/.containerenv exists")
    if (root / ".dockerenv").exists():
        return Container(kind="docker", evidence="/.dockerenv exists")
    try:
        cgroup = (root / "proc/1/cgroup").read_text(encoding="utf-8", errors="replace")
    except OSError:
        cgroup = ""
    for word, kind in (("kubepods", "k8s"), ("docker", "docker"), ("libpod", "podman")):
        if word in cgroup:
            return Container(kind=kind, evidence=f"/proc/1/cgroup mentions {word}")  # type: ignore[arg-type]
    return Container(kind="none", evidence="no container markers")


def cuda_toolkits(root: Path, nvcc: Tool | None) -> tuple[CudaToolkit, ...]:
    """Toolkits under /usr/local and /opt; `on_path` marks the one the nvcc on PATH belongs to."""
    homes: dict[Path, Path] = {}
    for home in sorted({*root.glob("usr/local/cuda*"), *root.glob("opt/cuda*")}):
        if (home / "bin/nvcc").exists() or (home / "version.json").exists():
            homes.setdefault(home.resolve(), home)  # /usr/local/cuda is usually a link to cuda-X.Y
    nvcc_home = Path(nvcc.path).resolve().parent.parent if nvcc else None
    found = []
    for real, home in homes.items():
        version, source = toolkit_version(real)
        on_path = nvcc is not None and (
            real == nvcc_home or (nvcc.version is not None and (version or "").startswith(nvcc.version))
        )
        found.append(CudaToolkit(path=str(home), version=version, on_path=on_path, source=source))
    return tuple(found)


def toolkit_version(home: Path) -> tuple[str | None, str]:
    """Version from version.json (11.1+), version.txt (older), cuda.h, or the folder name."""
    try:
        data = json.loads((home / "version.json").read_text(encoding="utf-8"))
        return str(data["cuda"]["version"]), f"{home}/version.json"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:  # "CUDA Version 10.2.89"
        m = re.search(r"(\d+\.\d+(?:\.\d+)?)", (home / "version.txt").read_text(encoding="utf-8"))
        if m:
            return m[1], f"{home}/version.txt"
    except OSError:
        pass
    try:  # "#define CUDA_VERSION 13000"
        header = (home / "include/cuda.h").read_text(encoding="utf-8", errors="replace")
        m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", header)
        if m:
            number = int(m[1])
            return f"{number // 1000}.{number % 1000 // 10}", f"{home}/include/cuda.h"
    except OSError:
        pass
    m = re.search(r"cuda-(\d+\.\d+)$", str(home))
    return (m[1], f"folder name {home.name}") if m else (None, str(home))


# Tools whose version is their distribution's: `ray --version` starts Ray's CLI (2.7 to 5.1 s on a
# loaded host, past TOOL_TIMEOUT), while the dist-info beside the script answers at once.
FROM_METADATA = {"ray": "ray"}


def tool(name: str, path_env: str) -> Tool | None:
    """Find `name` on PATH and ask it (or its installed metadata) for its version."""
    path = shutil.which(name, path=path_env)
    if path is None:
        return None
    if name in FROM_METADATA:
        return Tool(name=name, path=path, version=installed_version(Path(path), FROM_METADATA[name]))
    try:
        out = run([path, "--version"], timeout=TOOL_TIMEOUT)
        m = re.search(r"(\d+\.\d+(?:\.\d+)?)", out.stdout + out.stderr)
        version = m[1] if m else None
    except ProgramError:
        version = None
    return Tool(name=name, path=path, version=version)


def installed_version(script: Path, distribution: str) -> str | None:
    """The version of `distribution` in the environment a console script belongs to: the
    `NAME-VERSION.dist-info` folder (the wheel spec's name) under its prefix's site-packages,
    for the script as found and as resolved (a `uv tool` or pipx link)."""
    prefixes = dict.fromkeys((script.parent.parent, script.resolve().parent.parent))
    found = set()
    for prefix in prefixes:
        for packages in ("site-packages", "dist-packages"):
            for info in prefix.glob(f"lib*/python3*/{packages}/{distribution}-*.dist-info"):
                version = info.name.removeprefix(f"{distribution}-").removesuffix(".dist-info")
                if _VERSION.fullmatch(version):
                    found.add(version)
    return found.pop() if len(found) == 1 else None  # none, or a broken env with two


_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!]*")


def relevant_env(env: dict[str, str]) -> dict[str, str]:
    """The variables that matter, with any credentials in index URLs masked."""
    picked = {}
    for name in ENV_NAMES:
        if name in env and not is_secret_name(name):
            picked[name] = mask(env[name])  # R2: any variable may carry user:pass@ (HF_ENDPOINT)
    for name in sorted(env):
        if name.startswith(_ENV_PREFIXES) and not is_secret_name(name):
            picked.setdefault(name, mask(env[name]))
    return picked

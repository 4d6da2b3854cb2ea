"""The Python environment a training job will run in: which interpreter, and what is installed.

Everything is read by asking that interpreter in a child process (importlib.metadata, sysconfig,
/proc/self/maps); nothing heavy is imported, so a 6 GB verl env answers in a fraction of a second.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from verl_setup.errors import BadInputError
from verl_setup.host.facts import PythonInterpreter
from verl_setup.host.interpreter import NoAnswer, ask, shim_folder

PROBE_TIMEOUT = 15.0

# Distributions the checks look at (canonical names).
WANTED = (
    "verl", "torch", "vllm", "sglang", "tensorrt-llm", "ray", "transformers", "huggingface-hub",
    "flash-attn", "flashinfer-python", "tensordict", "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-runtime", "cuda-toolkit",
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class TargetEnv:
    """The interpreter a launch command runs, and the versions installed beside it."""

    python: str
    source: str
    interpreter: PythonInterpreter
    prefix: str
    base_prefix: str
    purelib: str
    pyvenv_version: str | None
    dists: dict[str, str] = field(default_factory=dict)
    locations: dict[str, str] = field(default_factory=dict)
    requires: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def version(self) -> str:
        """The running interpreter's exact version (from the loaded libpython)."""
        return self.interpreter.version


def choose_python(
    prefix: Path | None,
    env: Mapping[str, str],
    config_prefix: Path | None = None,
    workdir: Path | None = None,
) -> tuple[Path, str] | None:
    """The env the user means: --prefix > the active VIRTUAL_ENV > the team config's prefix >
    `workdir`/.venv > CONDA_PREFIX > python3 on PATH."""
    for folder, source in (
        (prefix, "flag --prefix"),
        (Path(env["VIRTUAL_ENV"]) if env.get("VIRTUAL_ENV") else None, "the active VIRTUAL_ENV"),
        (config_prefix, "the team config's prefix"),
        (None if workdir is None else workdir / ".venv", "./.venv"),
        (Path(env["CONDA_PREFIX"]) if env.get("CONDA_PREFIX") else None, "env CONDA_PREFIX"),
    ):
        if folder is None:
            continue
        for name in ("bin/python", "bin/python3"):
            if (folder / name).exists():
                return folder / name, f"{source} {folder}"
        if source == "flag --prefix":
            raise BadInputError(f"--prefix {str(folder)!r}: no bin/python there (expected a venv)")
    for entry in env.get("PATH", os.defpath).split(os.pathsep):
        if not entry or shim_folder(entry):
            continue
        exe = Path(entry) / "python3"
        if exe.is_file() and os.access(exe, os.X_OK):
            return exe, "python3 on PATH"
    return None


def probe_env(python: Path, source: str, env: Mapping[str, str]) -> TargetEnv | None:
    """Ask `python` (under the doctor's environment) what it is and what is installed."""
    try:
        answer = ask(
            python,
            timeout=PROBE_TIMEOUT,
            env=env,
            parts=("paths",),
            distributions=WANTED,
            requires=("torch",),
        )
    except NoAnswer:
        return None
    dists: dict[str, str] = {}
    locations: dict[str, str] = {}
    requires: dict[str, tuple[str, ...]] = {}
    for dist in answer.distributions:  # sys.path order: the first copy is the one imported
        name = canonicalize_name(dist.name)
        if name not in dists:
            dists[name], locations[name] = dist.version, dist.location
            if dist.requires is not None:
                requires[name] = dist.requires
    return TargetEnv(
        python=str(python),
        source=source,
        interpreter=PythonInterpreter(
            path=str(python),
            version=answer.version,
            implementation=answer.implementation,
            version_flag=answer.version_flag,
            libpython=answer.libpython,
            mismatch=answer.mismatch,
            source="doctor: the interpreter itself (sys.version_info, /proc/self/maps, --version)",
        ),
        prefix=str(answer.prefix),
        base_prefix=str(answer.base_prefix),
        purelib=str(answer.purelib),
        pyvenv_version=pyvenv_version(Path(str(answer.prefix))),
        dists=dists,
        locations=locations,
        requires=requires,
    )


def pyvenv_version(prefix: Path) -> str | None:
    """The Python a venv was made for: `version` (venv) or `version_info` (uv) in pyvenv.cfg."""
    try:
        text = (prefix / "pyvenv.cfg").read_text(encoding="utf-8")
    except OSError:
        return None
    m = re.search(r"^\s*version(?:_info)?\s*=\s*(\d+\.\d+\.\d+)", text, re.MULTILINE)
    return m[1] if m else None


_LOCAL_CUDA = re.compile(r"\+cu(\d+)(\d)$")
_RUNTIME_PIN = re.compile(
    r"^(nvidia-cuda-runtime(?:-cu\d+)?|cuda-toolkit)\s*(?:\[[^\]]*\])?\s*\(?\s*==\s*(\d+)\.(\d+)", re.I
)


def torch_cuda(version: str, requires: tuple[str, ...]) -> tuple[str | None, str]:
    """CUDA of a torch build: local tag +cuXYZ, else its CUDA runtime pin, else a CPU build."""
    m = _LOCAL_CUDA.search(version)
    if m:
        return f"{m[1]}.{m[2]}", f"torch version tag +cu{m[1]}{m[2]}"
    if version.endswith("+cpu"):
        return None, "torch version tag +cpu"
    for req in requires:
        pin = _RUNTIME_PIN.match(req.strip())
        if pin:
            return f"{pin[2]}.{pin[3]}", f"torch Requires-Dist {req.split(';')[0].strip()}"
    return None, "torch metadata names no CUDA runtime (a CPU build)"

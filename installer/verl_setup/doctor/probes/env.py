"""The Python environment a training job will run in: which interpreter, and what is installed.

Everything is read by asking that interpreter in a child process (importlib.metadata, sysconfig,
/proc/self/maps); nothing heavy is imported, so a 6 GB verl env answers in a fraction of a second.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from verl_setup.errors import BadInputError
from verl_setup.host.facts import PythonInterpreter
from verl_setup.util.runner import ProgramError, run

PROBE_TIMEOUT = 15.0

# Distributions the checks look at (canonical names).
WANTED = (
    "verl", "torch", "vllm", "sglang", "tensorrt-llm", "ray", "transformers", "huggingface-hub",
    "flash-attn", "flashinfer-python", "tensordict", "nvidia-cuda-runtime-cu12",
    "nvidia-cuda-runtime", "cuda-toolkit",
)  # fmt: skip

# Runs inside the target interpreter (3.8+): metadata only, no package is imported.
_CHILD = """
import json, re, sys, sysconfig
wanted = set(sys.argv[1].split(","))
lib = None
try:
    for line in open("/proc/self/maps"):
        parts = line.split()
        if len(parts) > 5 and "libpython" in parts[-1]:
            lib = parts[-1]
            break
except OSError:
    pass
out = {"version": "%d.%d.%d" % tuple(sys.version_info[:3]), "libpython": lib,
       "implementation": sys.implementation.name, "executable": sys.executable, "prefix": sys.prefix,
       "base_prefix": getattr(sys, "base_prefix", sys.prefix),
       "purelib": sysconfig.get_paths()["purelib"], "dists": {}, "locations": {}, "requires": {}}
try:
    from importlib import metadata
except ImportError:
    metadata = None
if metadata is not None:
    for dist in metadata.distributions():
        name = re.sub(r"[-_.]+", "-", (dist.metadata["Name"] or "")).lower()
        if name in wanted and name not in out["dists"]:
            out["dists"][name] = dist.version
            out["locations"][name] = str(dist.locate_file(""))
            if name == "torch":
                out["requires"][name] = list(dist.requires or [])
sys.stdout.write(json.dumps(out))
"""


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


def choose_python(prefix: Path | None, env: Mapping[str, str]) -> tuple[Path, str] | None:
    """The env to inspect: --prefix > VIRTUAL_ENV > CONDA_PREFIX > python3 on PATH."""
    for folder, source in (
        (prefix, "flag --prefix"),
        (Path(env["VIRTUAL_ENV"]) if env.get("VIRTUAL_ENV") else None, "env VIRTUAL_ENV"),
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
        # pyenv shims re-dispatch and exit 127 for inactive versions (see host/pythons.py).
        if not entry or entry.rstrip("/").endswith("shims"):
            continue
        exe = Path(entry) / "python3"
        if exe.is_file() and os.access(exe, os.X_OK):
            return exe, "python3 on PATH"
    return None


def probe_env(python: Path, source: str, env: Mapping[str, str]) -> TargetEnv | None:
    """Ask `python` (under the doctor's environment) what it is and what is installed."""
    try:
        out = run([str(python), "-c", _CHILD, ",".join(WANTED)], timeout=PROBE_TIMEOUT, env=env)
        flag = run([str(python), "--version"], timeout=PROBE_TIMEOUT, env=env)
        data = json.loads(out.stdout) if out.returncode == 0 else None
    except (ProgramError, json.JSONDecodeError):
        data = None
    if not isinstance(data, dict):
        return None
    m = re.search(r"Python (\S+)", flag.stdout + flag.stderr)
    version_flag = m[1] if m else None
    version = str(data["version"])
    libpython = data.get("libpython")
    mismatch = None
    if version_flag and version_flag != version:
        mismatch = f"`{python.name} --version` says {version_flag} but the running libpython is {version}"
    return TargetEnv(
        python=str(python),
        source=source,
        interpreter=PythonInterpreter(
            path=str(python),
            version=version,
            implementation=str(data["implementation"]),
            version_flag=version_flag,
            libpython=None if libpython is None else str(libpython),
            mismatch=mismatch,
            source="doctor: the interpreter itself (sys.version_info, /proc/self/maps, --version)",
        ),
        prefix=str(data["prefix"]),
        base_prefix=str(data["base_prefix"]),
        purelib=str(data["purelib"]),
        pyvenv_version=pyvenv_version(Path(str(data["prefix"]))),
        dists={str(k): str(v) for k, v in data["dists"].items()},
        locations={str(k): str(v) for k, v in data["locations"].items()},
        requires={str(k): tuple(map(str, v)) for k, v in data["requires"].items()},
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

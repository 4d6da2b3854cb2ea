"""Real compiled torch extensions for the tests: cached venvs holding one PyPI torch each, and tiny
C++ (and CUDA) extension wheels built against them with torch.utils.cpp_extension, g++ and nvcc.

PyPI's x86_64 torch wheels are CUDA builds; they install (and import) on a machine without a GPU.
Venvs and wheels are cached in ~/.cache/verl-setup-tests, keyed by their inputs: from a warm uv
cache a venv is hardlinked in a few seconds, and a wheel is built once per source text and torch.
The torches are ones the matrix rows install (2.11.0: the cpu row and verl 0.9's rows; 2.6.0: the
verl 0.4 rows), so uv's cache is shared with `make prove`.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import shutil
import subprocess
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from verl_setup.util.uvbin import find_uv

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "verl-setup-tests" / "torch-ext"
PYENV = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
HEAVY_LOCK = Path("/tmp/verl-heavy.lock")  # one compile or GPU-row install at a time on a shared machine
BUILD_TOOLS = ("setuptools==80.9.0", "wheel==0.45.1", "ninja==1.13.0")
CUDA_TOOLS = ("nvidia-cuda-nvcc==13.0.88",)

# One function over the ATen API and TORCH_CHECK, whose message argument is a std::string: its
# mangled name differs between the pre-C++11 and the C++11 ABI, as in flash-attn's real failures.
CPP_SOURCE = r"""
#include <torch/extension.h>

torch::Tensor scaled_add(const torch::Tensor& a, const torch::Tensor& b, double alpha) {
  TORCH_CHECK(a.sizes() == b.sizes(), "scaled_add: shapes differ: ", a.sizes(), " vs ", b.sizes());
  return a + b * alpha;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scaled_add", &scaled_add, "a + alpha * b"); }
"""

SETUP_PY = """
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, {kind}

setup(
    name={name!r},
    version={version!r},
    ext_modules=[{kind}({module!r}, {sources!r})],
    cmdclass={{"build_ext": BuildExtension}},
)
"""


def _fail_or_skip(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def python(minor: str) -> Path:
    """pyenv's newest CPython of `minor` (skip, or fail in CI, when there is none)."""
    found = sorted(PYENV.glob(f"{minor}.*/bin/python{minor}"))
    if not found:
        _fail_or_skip(f"needs a CPython {minor} under pyenv")
    return found[-1]


def _uv_env() -> dict[str, str]:
    return {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}


def torch_env(torch: str, minor: str = "3.12", extra: tuple[str, ...] = ()) -> Path:
    """A cached venv with PyPI's torch==`torch` (its CUDA libraries included) and the build tools."""
    key = hashlib.sha256(repr((torch, minor, BUILD_TOOLS, extra)).encode()).hexdigest()[:10]
    venv = CACHE / f"py{minor}-torch{torch}-{key}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / ".complete").exists():
            return venv
        interpreter, uv = python(minor), find_uv()
        for argv in (
            [uv, "venv", "-q", "--clear", "--python", str(interpreter), str(venv)],
            [
                uv,
                "pip",
                "install",
                "-q",
                "--python",
                str(venv / "bin/python"),
                f"torch=={torch}",
                *BUILD_TOOLS,
                *extra,
            ],
        ):
            done = subprocess.run(
                argv, env=_uv_env(), capture_output=True, text=True, timeout=1800, check=False
            )
            if done.returncode:
                _fail_or_skip(
                    f"cannot install torch=={torch} for Python {minor}: {done.stderr.strip()[-300:]}"
                )
        (venv / ".complete").write_text("ok")
    return venv


def fresh_env(torch: str, where: Path, minor: str = "3.12") -> Path:
    """A new venv at `where` with torch==`torch`, for a test to install into (hardlinked from uv's cache)."""
    torch_env(torch, minor)  # the cache is warm from here on
    uv = find_uv()
    for argv in (
        [uv, "venv", "-q", "--python", str(python(minor)), str(where)],
        [uv, "pip", "install", "-q", "--python", str(where / "bin/python"), f"torch=={torch}"],
    ):
        subprocess.run(argv, env=_uv_env(), capture_output=True, text=True, timeout=600, check=True)
    return where


def build_extension_wheel(
    venv: Path,
    *,
    name: str = "verl-abi-probe",
    version: str = "0.1.0",
    cuda_home: Path | None = None,
    source: str = CPP_SOURCE,
    env: Mapping[str, str] | None = None,
) -> Path:
    """A real wheel of a one-function torch extension built against `venv`'s torch (cached by inputs).

    With `cuda_home`, the source is compiled as a CUDAExtension by that toolkit's nvcc (no GPU needed).
    """
    kind, suffix = ("CUDAExtension", ".cu") if cuda_home else ("CppExtension", ".cpp")
    module = name.replace("-", "_")
    torch_dist = next((venv / "lib").glob("python3*/site-packages/torch-*.dist-info")).name
    key = hashlib.sha256(
        repr(
            (name, version, kind, source, torch_dist, str(venv), str(cuda_home), sorted((env or {}).items()))
        ).encode()
    ).hexdigest()[:12]
    out = CACHE / "wheels" / key
    built = sorted(out.glob("*.whl")) if out.is_dir() else []
    if built:
        return built[0]
    work = CACHE / "src" / key
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / f"{module}{suffix}").write_text(source)
    (work / "setup.py").write_text(
        SETUP_PY.format(kind=kind, name=name, version=version, module=module, sources=[f"{module}{suffix}"])
    )
    build_env = {**_uv_env(), "MAX_JOBS": "1", **(env or {})}
    if cuda_home:
        build_env |= {"CUDA_HOME": str(cuda_home), "PATH": f"{cuda_home / 'bin'}:{os.environ['PATH']}"}
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    with HEAVY_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(
            [str(venv / "bin/python"), "setup.py", "-q", "bdist_wheel", "-d", str(staging)],
            cwd=work,
            env=build_env,
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )
    if done.returncode:
        raise AssertionError(f"building {name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    staging.rename(out)
    return sorted(out.glob("*.whl"))[0]


def install_wheel(venv: Path, wheel: Path) -> None:
    """Install `wheel` into `venv` without its dependencies, as a user's `pip install x.whl` would."""
    subprocess.run(
        [find_uv(), "pip", "install", "-q", "--no-deps", "--python", str(venv / "bin/python"), str(wheel)],
        env=_uv_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )


def run_extension(venv: Path, module: str = "verl_abi_probe") -> subprocess.CompletedProcess[str]:
    """Import torch and the extension in `venv` and call it: what a training run would do first."""
    code = f"import torch, {module}\nprint({module}.scaled_add(torch.ones(3), torch.ones(3), 2.0).tolist())\n"
    return subprocess.run(
        [str(venv / "bin/python"), "-c", code], capture_output=True, text=True, timeout=300, check=False
    )


def repack(built: Path, wheel_name: str, files: Mapping[str, bytes], *, name: str, version: str) -> Path:
    """A wheel named `wheel_name` holding `files` and the compiled modules (.so) of `built`, with
    the dist-info of distribution `name` `version` (cached beside its inputs' hash): a compiled
    extension laid out as a real package ships it."""
    out = (
        CACHE
        / "repacked"
        / hashlib.sha256(repr((built.read_bytes(), wheel_name, sorted(files.items()))).encode()).hexdigest()[
            :12
        ]
    )
    wheel = out / wheel_name
    if wheel.exists():
        return wheel
    with zipfile.ZipFile(built) as source:
        modules = {n: source.read(n) for n in source.namelist() if n.endswith(".so")}
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    tag = "-".join(wheel_name.removesuffix(".whl").split("-")[-3:])
    contents = {
        **files,
        **modules,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: verl-setup-tests\nRoot-Is-Purelib: false\nTag: {tag}\n"
        ).encode(),
    }
    record = (
        "".join(
            f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n"
            for n, d in contents.items()
        )
        + f"{info}/RECORD,,\n"
    )
    out.mkdir(parents=True, exist_ok=True)
    partial = wheel.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as target:
        for n, d in {**contents, f"{info}/RECORD": record.encode()}.items():
            target.writestr(n, d)
    partial.rename(wheel)
    return wheel

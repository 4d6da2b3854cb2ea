"""Find Python interpreters (PATH, pyenv's versions folder, uv-managed) and ask each its version."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verl_setup.errors import InstallError
from verl_setup.host.facts import PythonInterpreter
from verl_setup.host.interpreter import NoAnswer, ask, shim_folder
from verl_setup.util.runner import ProgramError, run
from verl_setup.util.uvbin import find_uv

PY_TIMEOUT = 5.0

_NAME_RE = re.compile(r"^python(3(\.\d+)?)?$")


def candidates(path_env: str, home: Path, env: dict[str, str]) -> Iterator[tuple[Path, str]]:
    """Yield (executable, source) for the interpreters on PATH, then pyenv's (uv's: uv_managed)."""
    for folder in path_env.split(os.pathsep):
        if not folder or shim_folder(folder):  # pyenv's versions folder below has the same ones
            continue
        try:
            entries = sorted(Path(folder).iterdir())
        except OSError:
            continue
        for entry in entries:
            if _NAME_RE.match(entry.name):
                yield entry, "PATH"
    pyenv_root = Path(env.get("PYENV_ROOT") or home / ".pyenv")
    for version_dir in sorted((pyenv_root / "versions").glob("3.*")):
        yield version_dir / "bin/python3", "pyenv versions"


def uv_managed(root: Path) -> Iterator[tuple[Path, str]]:
    """Yield (executable, source) for the Pythons uv manages under `root` (uv_python_dir)."""
    for version_dir in sorted(root.glob("cpython-3.*")):
        yield version_dir / "bin/python3", "uv-managed"


def uv_python_dir(home: Path, env: dict[str, str]) -> Path:
    """Where uv keeps the Pythons it manages: uv's own answer (UV_PYTHON_INSTALL_DIR, a uv.toml,
    XDG_DATA_HOME), else uv's documented default when uv cannot be asked."""
    try:
        out = run([find_uv(), "python", "dir"], timeout=PY_TIMEOUT, env=env)
        answer = out.stdout.strip()
        if out.returncode == 0 and answer and "\n" not in answer:
            return Path(answer)
    except (ProgramError, InstallError):
        pass
    if env.get("UV_PYTHON_INSTALL_DIR"):
        return Path(env["UV_PYTHON_INSTALL_DIR"])
    return Path(env.get("XDG_DATA_HOME") or home / ".local/share") / "uv/python"


def interrogate(exe: Path, source: str) -> PythonInterpreter | None:
    """Ask one interpreter for its runtime version and its `--version` answer (None: no answer)."""
    try:
        answer = ask(exe, timeout=PY_TIMEOUT)
    except NoAnswer:
        return None
    return PythonInterpreter(
        path=str(exe),
        version=answer.version,
        implementation=answer.implementation,
        version_flag=answer.version_flag,
        libpython=answer.libpython,
        mismatch=answer.mismatch,
        source=source,
    )


def detect_pythons(path_env: str, home: Path, env: dict[str, str]) -> tuple[PythonInterpreter, ...]:
    """Every distinct interpreter (by resolved path), interrogated in parallel; uv is asked where
    its Pythons are while the others already answer."""
    seen: set[Path] = set()
    with ThreadPoolExecutor(max_workers=8) as pool:
        uv_root = pool.submit(uv_python_dir, home, env)
        jobs = []

        def add(found: Iterator[tuple[Path, str]]) -> None:
            for exe, source in found:
                try:
                    real = exe.resolve(strict=True)
                except OSError:
                    continue
                if os.access(real, os.X_OK) and real not in seen:
                    seen.add(real)
                    jobs.append(pool.submit(interrogate, exe, source))

        add(candidates(path_env, home, env))
        add(uv_managed(uv_root.result()))
        return tuple(p for p in (job.result() for job in jobs) if p is not None)

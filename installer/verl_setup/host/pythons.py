"""Find Python interpreters (PATH, pyenv's versions folder, uv-managed) and ask each its version."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verl_setup.errors import InstallError
from verl_setup.host.facts import PythonInterpreter
from verl_setup.host.interpreter import Answer, NoAnswer, ask, shim_folder
from verl_setup.host.interpreter_cache import InterpreterCache
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


def interrogate(exe: Path, source: str, cache: InterpreterCache | None = None) -> PythonInterpreter | None:
    """Ask one interpreter for its runtime version and its `--version` answer (None: no answer);
    from `cache` while it is the same binary."""
    kept = None if cache is None else cache.get(exe)
    if kept is None:
        try:
            answer = ask(exe, timeout=PY_TIMEOUT)
        except NoAnswer:
            return None
        kept = {
            "version": answer.version,
            "implementation": answer.implementation,
            "version_flag": answer.version_flag,
            "libpython": answer.libpython,
        }
        if cache is not None:
            cache.put(exe, kept)
    version, flag, lib = str(kept["version"]), kept["version_flag"], kept["libpython"]
    mismatch = Answer(
        exe=str(exe), version=version, full_version=version, implementation=str(kept["implementation"]),
        libpython=lib, version_flag=flag, executable=str(exe),
    ).mismatch  # fmt: skip
    return PythonInterpreter(
        path=str(exe),
        version=version,
        implementation=str(kept["implementation"]),
        version_flag=None if flag is None else str(flag),
        libpython=None if lib is None else str(lib),
        mismatch=mismatch,
        source=source,
    )


def detect_pythons(path_env: str, home: Path, env: dict[str, str]) -> tuple[PythonInterpreter, ...]:
    """Every distinct interpreter (by resolved path), interrogated in parallel; uv is asked where
    its Pythons are while the others already answer."""
    seen: set[Path] = set()
    cache = InterpreterCache(env)
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
                    jobs.append(pool.submit(interrogate, exe, source, cache))

        add(candidates(path_env, home, env))
        add(uv_managed(uv_root.result()))
        found = tuple(p for p in (job.result() for job in jobs) if p is not None)
    cache.save()
    return found

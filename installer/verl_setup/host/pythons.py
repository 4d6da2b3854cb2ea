"""Find Python interpreters (PATH, pyenv's versions folder, uv-managed) and ask each its version."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verl_setup.host.facts import PythonInterpreter
from verl_setup.host.interpreter import NoAnswer, ask, shim_folder

PY_TIMEOUT = 5.0

_NAME_RE = re.compile(r"^python(3(\.\d+)?)?$")


def candidates(path_env: str, home: Path, env: dict[str, str]) -> Iterator[tuple[Path, str]]:
    """Yield (executable, source) for every interpreter we can see, PATH first."""
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
    uv_root = Path(env.get("UV_PYTHON_INSTALL_DIR") or home / ".local/share/uv/python")
    for version_dir in sorted(uv_root.glob("cpython-3.*")):
        yield version_dir / "bin/python3", "uv-managed"


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
    """Every distinct interpreter (by resolved path), interrogated in parallel."""
    seen: dict[Path, tuple[Path, str]] = {}
    for exe, source in candidates(path_env, home, env):
        try:
            real = exe.resolve(strict=True)
        except OSError:
            continue
        if os.access(real, os.X_OK) and real not in seen:
            seen[real] = (exe, source)
    with ThreadPoolExecutor(max_workers=8) as pool:
        found = pool.map(lambda item: interrogate(*item), seen.values())
        return tuple(p for p in found if p is not None)

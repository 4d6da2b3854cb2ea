"""`uv lock` of a rendered uv project (render/uv_project.py writes the files; resolving them is an
environment's job, so render runs no program)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from verl_setup.errors import InstallError
from verl_setup.plan.select import Plan

LOCK_TIMEOUT_S = 900.0


def lock(
    folder_files: Mapping[str, str],
    *,
    plan: Plan,
    out: Path,
    env: Mapping[str, str],
    warn: Callable[[str], None],
) -> str:
    """uv.lock for the rendered files, made by `uv lock` in a scratch folder (an existing
    uv.lock in `out` is its starting point, so an unchanged project locks the same)."""
    from verl_setup.environment.python_choice import choose_python  # noqa: PLC0415
    from verl_setup.environment.uv import explain_failure, uv_env  # noqa: PLC0415
    from verl_setup.host.pythons import detect_pythons  # noqa: PLC0415
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415
    from verl_setup.util.uvbin import find_uv  # noqa: PLC0415

    downloads = env.get("UV_PYTHON_DOWNLOADS") not in ("never", "manual")
    uvenv = uv_env(python_downloads=downloads, base=env, warn=warn)
    found = detect_pythons(env.get("PATH", os.defpath), Path(env.get("HOME") or Path.home()), dict(env))
    # The lock is for the row's Python minor: any interpreter of it resolves the same.
    try:
        python = choose_python(plan.python, found, downloads=False).request
    except InstallError:
        if not downloads:
            raise
        python = plan.python  # uv finds or downloads it
    with tempfile.TemporaryDirectory(prefix="verl-setup-uv-project-") as tmp:
        for name, text in folder_files.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        if (out / "uv.lock").is_file():
            shutil.copyfile(out / "uv.lock", Path(tmp) / "uv.lock")
        argv = [find_uv(), "lock", "--python", python, "--no-progress"]
        try:
            result = run(argv, timeout=LOCK_TIMEOUT_S, env=uvenv, cwd=tmp)
        except ProgramError as exc:
            raise InstallError(f"uv lock: {exc}") from exc
        if result.returncode != 0:
            raise InstallError(
                f"row {plan.row.id}'s uv project does not lock: {explain_failure(result.stderr)}"
            )
        return (Path(tmp) / "uv.lock").read_text(encoding="utf-8")

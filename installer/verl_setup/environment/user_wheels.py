"""The user's checkouts and git refs as wheels, for a bundle (no network on the target, and no
source tree there either): `uv build --wheel` of each, taken into the lock as a hashed file:// pin,
which the bundle then copies like any other wheel."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from verl_setup.errors import InstallError
from verl_setup.plan.user_packages import UserPackages, UserRequirement
from verl_setup.plan.verl_source import split_ref
from verl_setup.util.bounded import one_line

BUILD_TIMEOUT_S = 1800.0


def as_wheels(user: UserPackages, folder: Path, *, uv: str, env: Mapping[str, str]) -> UserPackages:
    """Every checkout and git requirement replaced by the wheel built from it into `folder`."""
    out = []
    for req in user.requirements:
        if req.kind in ("path", "git"):
            wheel = _build(req, folder, uv=uv, env=env)
            extras = f"[{','.join(req.extras)}]" if req.extras else ""
            req = replace(  # noqa: PLW2901  # the same package, now a wheel file
                req, text=f"{req.name}{extras} @ {wheel.as_uri()}", kind="url", editable=False, path=None
            )
        out.append(req)
    return replace(user, requirements=tuple(out))


def _build(req: UserRequirement, folder: Path, *, uv: str, env: Mapping[str, str]) -> Path:
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="verl-setup-src-") as tmp:
        source = req.path
        if req.kind == "git" and req.url:
            repo, ref = split_ref(req.url)
            source = Path(tmp) / "src"
            steps = [["git", "clone", "-q", repo, str(source)]]
            steps += [["git", "-C", str(source), "checkout", "-q", ref]] if ref else []
            for argv in steps:
                done = run(argv, timeout=BUILD_TIMEOUT_S, env=env)
                if done.returncode != 0:
                    raise InstallError(
                        f"{req.shown()}: `{' '.join(argv[:2])}` failed: {one_line(done.stderr)[:300]}"
                    )
        assert source is not None  # noqa: S101  # a path requirement has its folder
        out = Path(tempfile.mkdtemp(prefix="wheel-", dir=folder))
        try:
            done = run(
                [uv, "build", "--wheel", "--out-dir", str(out), str(source)], timeout=BUILD_TIMEOUT_S, env=env
            )
        except ProgramError as exc:
            raise InstallError(f"uv build {req.shown()}: {exc}") from exc
        if done.returncode != 0:
            raise InstallError(f"uv build {req.shown()} failed: {one_line(done.stderr)[-300:]}")
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        raise InstallError(f"uv build {req.shown()} made {len(wheels)} wheels, expected one")
    return wheels[0]

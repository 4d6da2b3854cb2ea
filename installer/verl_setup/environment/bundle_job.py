"""`bundle`'s use case: the lock (--lock FILE as it is, else made as `lock` makes it, with the
user's checkouts and git refs as wheels built from them), then every file it names
(environment/bundle_make.py)."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from verl_setup.environment.lock_job import LockRequest, make_lock, planned_recipe
from verl_setup.errors import BadInputError
from verl_setup.output import Progress
from verl_setup.plan.select import Plan
from verl_setup.plan.steps import Recipe


@dataclass(frozen=True, kw_only=True)
class BundleRequest:
    """What to bundle, and where."""

    lock: LockRequest
    lock_file: Path | None  # --lock FILE: bundle this lock as it is
    out: Path
    python_build: bool = True
    wait_s: float = 600.0


def bundle(request: BundleRequest, env: Mapping[str, str], progress: Progress) -> dict[str, Any]:
    """Make (or read) the lock, then gather its files into `request.out`; the bundle's manifest."""
    from verl_setup.environment.bundle_make import BundleJob, make_bundle  # noqa: PLC0415
    from verl_setup.environment.uv import uv_and_env  # noqa: PLC0415

    uv, env_for_uv = uv_and_env(env, progress.say)
    with tempfile.TemporaryDirectory(prefix="verl-setup-user-wheels-") as built:
        text = _lock_text(request, env, (uv, env_for_uv), progress, wheels_dir=Path(built))
        job = BundleJob(
            lock_text=text,
            out=request.out,
            uv=uv,
            uv_env=env_for_uv,
            python_build=request.python_build,
            wait_s=request.wait_s,
        )
        return make_bundle(job, progress)


def _lock_text(
    request: BundleRequest,
    env: Mapping[str, str],
    uv: tuple[str, Mapping[str, str]],
    progress: Progress,
    *,
    wheels_dir: Path,
) -> str:
    """The sealed lock to bundle: --lock FILE as it is, else the planned row's."""
    from verl_setup.environment.lock import read_lock  # noqa: PLC0415

    if request.lock_file is not None:
        lock = read_lock(request.lock_file)
        built = sorted(name for name, mode in lock.extension_modes().items() if mode == "build")
        if built:
            raise BadInputError(f"{request.lock_file}: {_built_refusal(built[0])}")
        progress.step(
            "lock", f"{request.lock_file}: row {lock.row_id}, Python {lock.python}, {len(lock.pins)} pins"
        )
        return request.lock_file.read_text(encoding="utf-8")

    def bundleable(plan: Plan, recipe: Recipe) -> Recipe:
        if any(r.kind in ("path", "git") for r in recipe.user.requirements):
            from verl_setup.environment.user_wheels import as_wheels  # noqa: PLC0415

            # A checkout or a git ref travels as the wheel built from it (an editable one included).
            progress.step("build", "wheels of your checkouts and git refs (uv build --wheel)")
            user = as_wheels(recipe.user, wheels_dir, uv=uv[0], env=uv[1])
            options = request.lock
            recipe = planned_recipe(
                plan,
                extensions=options.extensions,
                wheel_sources=options.wheel_sources,
                user=user,
                env=env,
                say=progress.say,
            )
        built = [e.name for e in recipe.extensions if e.mode == "build"]
        if built:
            raise BadInputError(_built_refusal(built[0]))
        after = [s.name for s in recipe.steps if s.no_deps]
        if after:
            raise BadInputError(
                f"row {plan.row.id} installs {', '.join(after)} after its lock (--no-deps), which a bundle "
                "does not carry yet: bundle a row without such packages"
            )
        return recipe

    lock_request = replace(request.lock, format="requirements")
    return make_lock(lock_request, env, progress, step="lock", before_resolve=bundleable, uv=uv).text


def _built_refusal(name: str) -> str:
    return (
        f"{name} is built against torch at install time, which needs the network and a compiler: "
        "build it once (`verl-setup wheelhouse build`) and bundle with --wheel-source DIR, "
        f"or --without {name}"
    )

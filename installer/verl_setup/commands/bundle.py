"""`verl-setup bundle`: a lock (planned here, or --lock FILE) and its every file, for `install --offline`."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import extension_requests, plan_for, wheel_sources, with_user_packages
from verl_setup.commands.flags import add_plan_flags, add_recipe_flags
from verl_setup.errors import BadInputError, VerlSetupError
from verl_setup.output import Progress, emit, envelope


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The bundle flags."""
    p.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="the bundle folder (replaced whole)"
    )
    p.add_argument(
        "--lock", type=Path, metavar="FILE", help="bundle this lock (default: lock the planned row)"
    )
    p.add_argument(
        "--no-python", action="store_true", help="leave the Python build out (the target provides the Python)"
    )
    p.add_argument("--wait", type=float, default=600.0, metavar="S", help="wait for another run on DIR (600)")
    p.add_argument("--json", action="store_true", help="machine-readable result")
    add_recipe_flags(p)
    add_plan_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Make the lock (or read --lock), then gather its files into --out DIR."""
    from verl_setup.environment.bundle_make import BundleJob, make_bundle  # noqa: PLC0415
    from verl_setup.environment.uv import uv_and_env  # noqa: PLC0415

    progress = Progress(quiet=args.quiet)
    try:
        uv, env_for_uv = uv_and_env(env, progress.say)
        with tempfile.TemporaryDirectory(prefix="verl-setup-user-wheels-") as built:
            text = _lock_text(args, env, uv, env_for_uv, progress, wheels_dir=Path(built))
            job = BundleJob(
                lock_text=text,
                out=args.out,
                uv=uv,
                uv_env=env_for_uv,
                python_build=not args.no_python,
                wait_s=args.wait,
            )
            result = make_bundle(job, progress)
    except VerlSetupError as exc:
        if args.json:
            emit(out, "bundle", {"seconds": progress.elapsed(), "steps": progress.steps}, exc)
        raise
    if args.json:
        out.write(envelope("bundle", {**result, "seconds": progress.elapsed()}))
    return 0


def _lock_text(
    args: argparse.Namespace,
    env: Mapping[str, str],
    uv: str,
    env_for_uv: Mapping[str, str],
    progress: Progress,
    *,
    wheels_dir: Path,
) -> str:
    """The sealed lock to bundle: --lock FILE as it is, else the planned row's, made as `lock` makes it."""
    from verl_setup.environment.lock import compile_lock, parse, read_lock  # noqa: PLC0415

    if args.lock is not None:
        lock = read_lock(args.lock)
        built = sorted(name for name, mode in lock.extension_modes().items() if mode == "build")
        if built:
            raise BadInputError(f"{args.lock}: {_built_refusal(built[0])}")
        progress.step("lock", f"{args.lock}: row {lock.row_id}, Python {lock.python}, {len(lock.pins)} pins")
        return Path(args.lock).read_text(encoding="utf-8")
    from verl_setup.environment.wheel_pick import resolve_wheels  # noqa: PLC0415
    from verl_setup.plan.recipe import recipe_for  # noqa: PLC0415

    plan = plan_for(args, env)
    recipe = resolve_wheels(
        plan, recipe_for(plan, extension_requests(args), env, wheel_sources(args)), progress.say
    )
    recipe = with_user_packages(args, plan, recipe, env)
    if any(r.kind in ("path", "git") for r in recipe.user.requirements):
        from verl_setup.environment.user_wheels import as_wheels  # noqa: PLC0415
        from verl_setup.plan.user_recipe import with_user_packages as with_packages  # noqa: PLC0415

        # A checkout or a git ref travels as the wheel built from it (an editable one included).
        progress.step("build", "wheels of your checkouts and git refs (uv build --wheel)")
        user = as_wheels(recipe.user, wheels_dir, uv=uv, env=env_for_uv)
        base = recipe_for(plan, extension_requests(args), env, wheel_sources(args))
        recipe = with_packages(resolve_wheels(plan, base, progress.say), user)
    built = [e.name for e in recipe.extensions if e.mode == "build"]
    if built:
        raise BadInputError(_built_refusal(built[0]))
    after = [s.name for s in recipe.steps if s.no_deps]
    if after:
        raise BadInputError(
            f"row {plan.row.id} installs {', '.join(after)} after its lock (--no-deps), which a bundle does "
            "not carry yet: bundle a row without such packages"
        )
    progress.step("lock", f"row {plan.row.id}, Python {plan.python}; resolving with hashes")
    for warning in recipe.warnings:
        progress.say(f"warning: {warning}")
    text: str = compile_lock(plan, recipe, uv=uv, env=env_for_uv)
    parse(text, Path("<new lock>"))
    return text


def _built_refusal(name: str) -> str:
    return (
        f"{name} is built against torch at install time, which needs the network and a compiler: "
        "build it once (`verl-setup wheelhouse build`) and bundle with --wheel-source DIR, "
        f"or --without {name}"
    )

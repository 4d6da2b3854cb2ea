"""What an install decides before it touches the disk: a Job (plan, recipe, interpreter, uv commands).

The dry run prints a Job; install.py carries one out.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from verl_setup.environment.lock_job import planned_recipe
from verl_setup.environment.python_choice import PythonChoice, choose_python
from verl_setup.environment.staging import Layout, check_prefix, resolve_prefix
from verl_setup.errors import InstallError
from verl_setup.output import Progress
from verl_setup.plan.make import PlanInputs
from verl_setup.plan.select import Plan
from verl_setup.plan.steps import Choice, Recipe, Step
from verl_setup.plan.user_packages import UserPackages

if TYPE_CHECKING:
    from verl_setup.environment.bundle import Bundle
    from verl_setup.environment.lock import Lock
    from verl_setup.environment.with_resolve import Resolved

INPUTS = "verl-setup"  # folder inside the venv with the exact uv inputs used


@dataclass(frozen=True, kw_only=True)
class InstallOptions:
    """What `install` was asked to do (commands/install.py builds it from the flags)."""

    plan: PlanInputs
    prefix: Path
    lock: Path | None = None
    extensions: Mapping[str, Choice] = dataclasses.field(default_factory=dict)
    wheel_sources: tuple[str, ...] = ()
    python_downloads: bool = True
    wait_s: float = 600.0
    import_timeout: float | None = 900.0
    offline: Path | None = None  # a bundle folder (`verl-setup bundle`): its lock, no network
    upgrade: bool = False  # resolve the row anew instead of holding it to its recorded closure
    user: UserPackages = dataclasses.field(default_factory=UserPackages)  # --with, --with-editable, ...


@dataclass(frozen=True, kw_only=True)
class Command:
    """One uv invocation of an install: its argv, extra environment, and the recipe step it runs."""

    what: str
    argv: list[str]
    env: tuple[tuple[str, str], ...] = ()
    step: Step | None = None


def uv_commands(
    uv: str,
    staging: Path,
    choice: PythonChoice,
    recipe: Recipe,
    lock: Lock | None,
    *,
    bundle: Bundle | None = None,
) -> list[Command]:
    """The exact uv commands an install runs, in the recipe's order (from a bundle: offline)."""
    from verl_setup.environment.uv import sync_command, venv_command  # noqa: PLC0415

    python_exe = str(staging / "bin" / "python")
    offline: list[str] = []
    if bundle is not None:
        from verl_setup.environment.bundle import offline_flags  # noqa: PLC0415

        offline = offline_flags(bundle)
    venv = venv_command(uv, path=staging, python=choice.request) + offline[:1]
    commands = [Command(what="venv", argv=venv)]
    overrides = str(staging / INPUTS / "overrides.txt")
    constraints = str(staging / INPUTS / "constraints.txt")
    if lock is not None:
        # Every distribution of a lock is a hashed wheel (flash-attn included, when a prebuilt
        # wheel exists), so one sync installs them without building anything; a flash-attn that
        # must be built against torch still comes after it, as in the recipe.
        sync = sync_command(
            uv,
            python_exe=Path(python_exe),
            lock=(lock.path if bundle is None else bundle.sync_file).absolute(),
            index_url=lock.index_url if bundle is None else None,
            sdists=recipe.sdists,
        )
        if lock.fields.get("with"):  # the user's packages: wheel or sdist, as uv's default
            from verl_setup.environment.with_resolve import without_binary_only  # noqa: PLC0415

            sync = without_binary_only(sync)
        commands.append(Command(what="lock", argv=sync + offline))
        # The lock holds no package installed without its dependencies: they come after it.
        from verl_setup.environment.lock import after_lock  # noqa: PLC0415  # only a lock's install

        steps = after_lock(recipe)
    else:
        steps = list(recipe.venv_steps)
    for step in steps:
        pip_args = step.pip_args(overrides, constraints)
        argv = [uv, "pip", "install", "--python", python_exe, *pip_args, *offline]
        commands.append(Command(what=step.name, argv=argv, env=step.env, step=step))
    if lock is not None:
        from verl_setup.environment.user_lock import local_command  # noqa: PLC0415

        # The checkouts and git refs the lock could not hash, after its wheels (their dependencies are in it).
        commands += [
            Command(what=key, argv=local_command(uv, python_exe, lock.fields[key]))
            for key in ("local", "git")
            if lock.fields.get(key)
        ]
    return commands


@dataclass(frozen=True, kw_only=True)
class Job:
    """Everything an install decided before touching the disk."""

    plan: Plan
    recipe: Recipe
    lock: Lock | None
    wanted: str
    layout: Layout
    choice: PythonChoice
    staging: Path
    commands: list[Command]
    uv: str
    uv_env: dict[str, str]
    env: Mapping[str, str]
    import_timeout: float | None
    bundle: Bundle | None = None
    upgrade: bool = False
    resolved: tuple[Resolved, ...] = ()  # the user's packages, as the resolve with the row gave them
    kept: dict[str, Path] = dataclasses.field(default_factory=dict)  # --keep: name -> its .dist-info


def prepare(options: InstallOptions, env: Mapping[str, str], progress: Progress) -> Job:
    """Plan, make the recipe, check the prefix, choose the interpreter, build the uv commands."""
    from verl_setup.environment.uv import uv_env  # noqa: PLC0415
    from verl_setup.host.pythons import detect_pythons  # noqa: PLC0415
    from verl_setup.plan.make import make_plan  # noqa: PLC0415
    from verl_setup.util.uvbin import find_uv  # noqa: PLC0415

    bundle = None
    if options.offline is not None:
        from verl_setup.environment.bundle import open_bundle  # noqa: PLC0415

        bundle, env = open_bundle(options.offline, env, progress)
        plan_inputs = dataclasses.replace(options.plan, row=options.plan.row or bundle.row)
        options = dataclasses.replace(options, lock=bundle.lock, plan=plan_inputs)
    lock = None
    if options.lock:
        from verl_setup.environment.lock import read_lock  # noqa: PLC0415

        lock = read_lock(options.lock)
    plan = make_plan(options.plan, env)
    row = plan.row
    engine = "no engine" if row.engine.name == "none" else f"{row.engine.name} {row.engine.version}"
    if lock is None:
        progress.step("plan", f"row {row.id} (verl {row.verl.version}, {engine}, torch {row.torch.version})")
    else:
        progress.step("plan", f"lock {lock.path.name}: row {lock.row_id}, Python {lock.python}")
        if lock.row_id != row.id:
            progress.say(f"warning: the lock is for row {lock.row_id}; this machine's plan selects {row.id}")
    if plan.needs_forward_compat:
        raise InstallError(
            f"row {row.id} runs on driver {plan.target.driver.value} only through CUDA forward "
            "compatibility, which works inside the image `verl-setup render docker --policy forward` "
            "makes, not in a venv on this host; nothing was changed"
        )
    uv = find_uv()
    plan = _held(plan, options, lock, uv=uv, env=env, progress=progress)
    requests = options.extensions if lock is None else lock.requests(options.extensions)
    recipe = planned_recipe(
        plan,
        extensions=requests,
        wheel_sources=options.wheel_sources,
        user=options.user,
        env=env,
        say=progress.say,
        pick_wheels=lock is None,  # a lock names its wheels itself
    )
    for warning in (*plan.warnings, *recipe.warnings):
        progress.say(f"warning: {warning}")
    wanted = lock.python if lock else plan.python
    prefix = Path(options.prefix).expanduser().absolute()
    prefix = resolve_prefix(prefix)
    check_prefix(prefix)
    found = (  # planning already detected this machine's interpreters, unless it read a host file
        plan.target.host_pythons
        if plan.target.local
        else detect_pythons(env.get("PATH", os.defpath), Path(env.get("HOME") or Path.home()), dict(env))
    )
    downloads = options.python_downloads and env.get("UV_PYTHON_DOWNLOADS") not in ("never", "manual")
    choice = choose_python(wanted, found, downloads=downloads)
    progress.step("python", f"{choice.version} from {choice.source} ({choice.request})")
    if choice.warning:
        progress.say(f"warning: {choice.warning}")
    kept: dict[str, Path] = {}
    if options.user.keep:
        from verl_setup.environment.keep import installed, keep_recipe, version_of  # noqa: PLC0415

        kept = installed(prefix, options.user.keep)
        recipe = keep_recipe(recipe, {n: version_of(i) for n, i in kept.items()})
        progress.step("keep", ", ".join(f"{n} {version_of(i)} (--keep)" for n, i in kept.items()))
    layout = Layout(prefix=prefix)
    staging = layout.staging(os.getpid())
    return Job(
        plan=plan,
        recipe=recipe,
        lock=lock,
        wanted=wanted,
        layout=layout,
        choice=choice,
        staging=staging,
        commands=uv_commands(uv, staging, choice, recipe, lock, bundle=bundle),
        uv=uv,
        uv_env=uv_env(python_downloads=downloads, base=env, warn=progress.say),
        env=env,
        import_timeout=options.import_timeout,
        bundle=bundle,
        upgrade=options.upgrade,
        kept=kept,
    )


def _held(
    plan: Plan,
    options: InstallOptions,
    lock: Lock | None,
    *,
    uv: str,
    env: Mapping[str, str],
    progress: Progress,
) -> Plan:
    """The plan with the closure the install holds the row to: the recorded one (said), or with
    --upgrade a fresh resolution whose moves are said before anything changes. A lock is its own."""
    if lock is not None:
        return plan
    if options.upgrade and options.offline is None:
        from verl_setup.environment.closure_moves import fresh_closure  # noqa: PLC0415

        return dataclasses.replace(
            plan, closure_override=fresh_closure(plan, uv=uv, env=env, say=progress.say)
        )
    progress.step("closure", plan.closure.words())
    return plan


def dry_run_json(job: Job) -> dict[str, Any]:
    """What an install would run, as `install --dry-run --json` prints it (data of the envelope)."""
    return {
        "dry_run": True,
        "row": job.plan.row.id,
        "lock": None if job.lock is None else str(job.lock.path),
        "prefix": str(job.layout.prefix),
        "python": job.choice.version,
        "warnings": list(job.recipe.warnings),
        "with": job.recipe.user.to_json(),
        "commands": [
            {
                "step": c.what,
                "title": c.step.title if c.step else "",
                "env": dict(c.env),
                "argv": list(c.argv),
            }
            for c in job.commands
        ],
    }


def write_dry_run(job: Job, out: TextIO) -> None:
    """Print what an install would run, changing nothing."""
    row = job.plan.row
    what = f"row {row.id}" if job.lock is None else f"lock {job.lock.path} (row {job.lock.row_id})"
    out.write(f"# install {what} into {job.layout.prefix} (dry run: nothing is changed)\n")
    for warning in job.recipe.warnings:
        out.write(f"# warning: {warning}\n")
    for command in job.commands:
        env = "".join(f"{k}={shlex.quote(v)} " for k, v in command.env)
        out.write(f"# {command.what}: {command.step.title if command.step else ''}\n".replace(": \n", "\n"))
        out.write(env + shlex.join(command.argv) + "\n")
    from verl_setup.environment.verify import MANIFEST  # noqa: PLC0415

    out.write(f"# then: verify, write {MANIFEST}, swap {job.staging.name} into {job.layout.prefix}\n")

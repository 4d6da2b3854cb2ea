"""`verl-setup install`: plan, build a venv beside the prefix with uv, verify, record, swap in.

The old environment at the prefix is replaced only by a new one that verified, in one atomic
exchange (staging.py); an interrupted run leaves the old one in place and its staging dir for
the next run to clean. Progress: one line per step on stderr, with the elapsed time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from verl_setup import __version__
from verl_setup.environment.lock import Lock, read_lock
from verl_setup.environment.staging import (
    Layout,
    check_prefix,
    clean_leftovers,
    describe_os_error,
    install_lock,
    remove_tree,
    swap,
)
from verl_setup.environment.uv import uv_error
from verl_setup.environment.verify import (
    MANIFEST,
    Expected,
    Report,
    Snapshot,
    from_lock,
    from_requirements,
    last_line,
    verify_env,
)
from verl_setup.errors import InstallError
from verl_setup.host.facts import PythonInterpreter
from verl_setup.output import Progress
from verl_setup.plan.make import PlanInputs
from verl_setup.plan.recipe import Choice, Recipe, Step, recipe_for
from verl_setup.plan.select import Plan
from verl_setup.util.runner import Completed, ProgramError, stream

VENV_TIMEOUT_S = 300.0
INSTALL_TIMEOUT_S = 3600.0
INPUTS = "verl-setup"  # folder inside the venv with the exact uv inputs used
SOURCE_ORDER = ("uv-managed", "pyenv versions", "PATH")


@dataclass(frozen=True, kw_only=True)
class PythonChoice:
    """The interpreter `uv venv --python` gets: a path, or a version for uv to find or download."""

    request: str
    version: str
    source: str
    warning: str | None = None
    fallback: PythonChoice | None = None  # used when uv cannot find or download `request`


def choose_python(wanted: str, found: Sequence[PythonInterpreter], *, downloads: bool) -> PythonChoice:
    """The exact version: detected, else uv's (found or downloaded); the same minor only as a fallback."""
    usable = [p for p in found if p.implementation == "cpython" and p.mismatch is None]
    usable.sort(key=lambda p: SOURCE_ORDER.index(p.source) if p.source in SOURCE_ORDER else len(SOURCE_ORDER))
    exact = [p for p in usable if p.version == wanted]
    if exact:
        return PythonChoice(request=exact[0].path, version=wanted, source=exact[0].source)
    minor = ".".join(wanted.split(".")[:2])
    same = sorted(
        (p for p in usable if p.version.startswith(minor + ".")),
        key=lambda p: tuple(int(x) for x in p.version.split(".") if x.isdigit()),
    )
    fallback = None
    if same:
        p = same[-1]
        why = "uv could not get it" if downloads else "Python downloads are off"
        fallback = PythonChoice(
            request=p.path,
            version=p.version,
            source=p.source,
            warning=(
                f"Python {wanted} not available ({why}); using {p.version} ({p.path}, {p.source}). "
                f"Ray refuses worker nodes whose Python patch differs from the head's: run {p.version} "
                "on every node, or install the exact version"
            ),
        )
    if downloads:
        return PythonChoice(
            request=wanted,
            version=wanted,
            source="uv (found, or downloaded as a managed Python)",
            fallback=fallback,
        )
    if fallback is not None and wanted != minor:
        return fallback
    if fallback is not None:
        return dataclasses.replace(fallback, warning=None)
    exact_name = wanted if wanted != minor else f"{minor}.x"
    raise InstallError(
        f"no Python {minor} found (looked on PATH, in pyenv's versions folder and among uv-managed "
        f"Pythons) and downloads are off (--no-python-downloads or UV_PYTHON_DOWNLOADS): install Python "
        f"{exact_name} (`uv python install {wanted}` or `pyenv install {exact_name}`), or allow downloads"
    )


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM runs the same cleanup as Ctrl-C (a SIGKILL leaves it to the next run)."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass(frozen=True, kw_only=True)
class Command:
    """One uv invocation of an install: its argv, extra environment, and the recipe step it runs."""

    what: str
    argv: list[str]
    env: tuple[tuple[str, str], ...] = ()
    step: Step | None = None


def uv_commands(
    uv: str, staging: Path, choice: PythonChoice, recipe: Recipe, lock: Lock | None
) -> list[Command]:
    """The exact uv commands an install runs, in the recipe's order."""
    from verl_setup.environment.uv import sync_command, venv_command  # noqa: PLC0415

    python_exe = str(staging / "bin" / "python")
    commands = [Command(what="venv", argv=venv_command(uv, path=staging, python=choice.request))]
    overrides = str(staging / INPUTS / "overrides.txt")
    if lock is not None:
        # Every distribution of a lock is a hashed wheel (flash-attn included, when a prebuilt
        # wheel exists), so one sync installs them without building anything; a flash-attn that
        # must be built against torch still comes after it, as in the recipe.
        commands.append(
            Command(
                what="lock",
                argv=sync_command(
                    uv, python_exe=Path(python_exe), lock=lock.path.absolute(), index_url=lock.index_url
                ),
            )
        )
        built = [e.name for e in recipe.extensions if e.mode == "build"]
        # The lock holds no package installed without its dependencies: they come after it.
        steps = [
            s
            for s in recipe.steps
            if s.name in built or s.name.removesuffix("-build-requires") in built or s.no_deps
        ]
    else:
        steps = list(recipe.steps)
    for step in steps:
        argv = [uv, "pip", "install", "--python", python_exe, *step.pip_args(overrides)]
        commands.append(Command(what=step.name, argv=argv, env=step.env, step=step))
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


def prepare(options: InstallOptions, env: Mapping[str, str], progress: Progress) -> Job:
    """Plan, make the recipe, check the prefix, choose the interpreter, build the uv commands."""
    from verl_setup.environment.uv import find_uv, uv_env  # noqa: PLC0415
    from verl_setup.host.pythons import detect_pythons  # noqa: PLC0415
    from verl_setup.plan.make import make_plan  # noqa: PLC0415

    lock = read_lock(options.lock) if options.lock else None
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
    requests = options.extensions if lock is None else lock.requests(options.extensions)
    recipe = recipe_for(plan, requests, env, options.wheel_sources)
    if lock is None:
        from verl_setup.environment.wheel_pick import resolve_wheels  # noqa: PLC0415

        recipe = resolve_wheels(plan, recipe, progress.say)
    for warning in (*plan.warnings, *recipe.warnings):
        progress.say(f"warning: {warning}")
    wanted = lock.python if lock else plan.python
    prefix = Path(options.prefix).expanduser().absolute()
    prefix = prefix.resolve() if prefix.is_symlink() else prefix
    check_prefix(prefix)
    uv = find_uv()
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
        commands=uv_commands(uv, staging, choice, recipe, lock),
        uv=uv,
        uv_env=uv_env(python_downloads=downloads, base=env),
        env=env,
        import_timeout=options.import_timeout,
    )


def build(job: Job, progress: Progress) -> tuple[Job, dict[str, Any], Report]:
    """Create, fill and verify the staging venv, and write its manifest."""
    from verl_setup.environment.uv import write_inputs  # noqa: PLC0415

    row, lock, layout = job.plan.row, job.lock, job.layout
    progress.step(
        "venv", f"creating {job.staging.name} beside {layout.prefix.name} (Python {job.choice.version})"
    )
    job = _make_venv(job, progress)
    final = job.recipe.step("verl")
    write_inputs(row, job.staging / INPUTS, final.requirements if final else None)
    for command in job.commands[1:]:
        title = command.step.title if command.step else f"syncing {lock.path.name if lock else 'the lock'}"
        progress.step(command.what, title)
        if command.what == "flash-attn" and job.recipe.flash_attn and job.recipe.flash_attn.mode == "wheel":
            _check_abi(job)
        tty = sys.stderr.isatty()
        if tty:
            progress.end_line()  # uv draws its own progress bars below the status line
        _run_uv(command, job=job, tty=tty, timeout=INSTALL_TIMEOUT_S)
    progress.step(
        "verify", "installed versions" + ("" if job.import_timeout is None else ", then the import probe")
    )

    def expected_for(snap: Snapshot) -> Expected:
        if lock is not None:
            return from_lock(lock, snap.markers)
        return from_requirements(f"row {row.id}", list(job.recipe.verify_pins))

    python = job.staging / "bin" / "python"
    report = verify_env(
        python,
        expected_for,
        import_timeout=job.import_timeout,
        env=job.env,
        engine=row.engine.name,
        gpu_only=row.gpu_only_imports,
        left_out=job.plan.matrix.rows_file.left_out_modules(
            e.name for e in job.recipe.extensions if e.mode == "without"
        ),
    )
    if not report.ok:
        sys.stderr.write(report.text())
        raise InstallError(f"the new environment failed verification: {report.summary()}")
    progress.step("manifest", f"{MANIFEST}: {len(report.snapshot.versions())} distributions")
    record = manifest(job, report)
    (job.staging / MANIFEST).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return job, record, report


def _make_venv(job: Job, progress: Progress) -> Job:
    """`uv venv`; when uv cannot get the exact Python, the same minor found here, with a warning."""
    try:
        _run_uv(job.commands[0], job=job, tty=False, timeout=VENV_TIMEOUT_S)
    except InstallError as exc:
        fallback = job.choice.fallback
        if fallback is None:
            raise
        progress.say(f"warning: uv could not provide Python {job.choice.version}: {exc}")
    else:
        return job
    if fallback.warning:
        progress.say(f"warning: {fallback.warning}")
    if job.staging.exists():
        remove_tree(job.staging)
    job = dataclasses.replace(
        job, choice=fallback, commands=uv_commands(job.uv, job.staging, fallback, job.recipe, job.lock)
    )
    _run_uv(job.commands[0], job=job, tty=False, timeout=VENV_TIMEOUT_S)
    return job


def _check_abi(job: Job) -> None:
    """The prebuilt flash-attn wheel was chosen for a C++ ABI: the installed torch must have it."""
    fa = job.recipe.flash_attn
    code = "import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"
    out = stream([str(job.staging / "bin" / "python"), "-c", code], timeout=300, env=job.env)
    if fa is None or out.returncode != 0:
        raise InstallError(f"cannot read the installed torch's C++ ABI: {last_line(out.stderr)}")
    have = out.stdout.strip() == "1"
    if have != fa.cxx11abi:
        raise InstallError(
            f"the installed torch uses C++11 ABI {str(have).upper()}, the flash-attn wheel chosen for it "
            f"{str(fa.cxx11abi).upper()}: the matrix's cxx11abi_from_torch is wrong for this torch"
        )


def manifest(job: Job, report: Report) -> dict[str, Any]:
    """The record written into the venv: what was asked, what was used, what got installed."""
    from verl_setup.environment.uv import uv_version  # noqa: PLC0415

    plan, lock, snap, choice = job.plan, job.lock, report.snapshot, job.choice
    fa = job.recipe.flash_attn
    return {
        "schema": 1,
        "tool": {"verl-setup": __version__, "uv": uv_version(job.uv)},
        "prefix": str(job.layout.prefix),
        "row": {"id": plan.row.id, "sha256": plan.row.content_hash(), "requirements": plan.row.requirements()}
        if lock is None
        else {"id": lock.row_id, "sha256": lock.fields["row-sha256"], "requirements": None},
        "matrix": {"path": str(plan.matrix.path), "sha256": plan.matrix.sha256},
        "lock": None
        if lock is None
        else {"path": str(lock.path.absolute()), "body_sha256": lock.fields["body-sha256"]},
        "index_url": lock.index_url if lock else plan.index_url,
        "python": {
            "version": snap.python,
            "requested": job.wanted,
            "interpreter": choice.request,
            "source": choice.source,
        },
        "recipe": [{"step": c.what, "argv": c.argv[1:]} for c in job.commands],
        "flash_attn": None if fa is None else {"version": fa.version, "mode": fa.mode, "reason": fa.reason},
        "torch_extensions": {
            e.name: {
                "version": e.version,
                "mode": e.mode,
                "source": e.source,
                "url": e.url,
                "sha256": e.sha256,
                "reason": e.reason,
            }
            for e in job.recipe.extensions
        },
        "platform": snap.platform,
        "facts": plan.target.facts_json(),
        "warnings": [*plan.warnings, *job.recipe.warnings, *([choice.warning] if choice.warning else [])],
        "distributions": dict(sorted(snap.versions().items())),
        "import_probe": None if report.probe is None else report.probe.to_json(),
    }


def _run_uv(command: Command, *, job: Job, tty: bool, timeout: float) -> Completed:
    from verl_setup.environment.uv import explain_failure  # noqa: PLC0415

    env = dict(job.uv_env, **dict(command.env))
    try:
        out = stream(command.argv, timeout=timeout, env=env, passthrough=tty)
    except ProgramError as exc:
        raise InstallError(f"uv ({command.what}): {exc}") from exc
    if out.returncode == 0:
        return out
    if tty:
        raise InstallError(f"uv ({command.what}) failed (exit {out.returncode}); uv's messages are above")
    if "No space left on device" in out.stderr:
        raise InstallError(describe_os_error(job.layout, OSError(errno.ENOSPC, "No space left on device")))
    if "Hash mismatch" in out.stderr:
        raise InstallError(
            f"uv refused the lock: {uv_error(out.stderr)} "
            "(the lock was altered, or the index serves another file)"
        )
    raise InstallError(f"uv ({command.what}) failed: {explain_failure(out.stderr)}")


def _works_at(prefix: Path) -> None:
    """After the swap: the moved venv runs and knows where it is."""
    out = stream([str(prefix / "bin" / "python"), "-c", "import sys; print(sys.prefix)"], timeout=60)
    if out.returncode != 0 or Path(out.stdout.strip()) != prefix:
        found = out.stdout.strip() or last_line(out.stderr)
        raise InstallError(f"the new environment does not run at {prefix} ({found})")


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
    out.write(f"# then: verify, write {MANIFEST}, swap {job.staging.name} into {job.layout.prefix}\n")


def install(
    options: InstallOptions, env: Mapping[str, str], progress: Progress, *, dry_run: bool, out: TextIO
) -> dict[str, Any] | None:
    """Install (or with `dry_run` print the commands); the result object for --json, None when dry."""
    with _sigterm_unwinds():
        job = prepare(options, env, progress)
        if dry_run:
            write_dry_run(job, out)
            return None
        with install_lock(job.layout, wait_s=options.wait_s, say=progress.say):
            clean_leftovers(job.layout, progress.say)
            try:
                job, record, report = build(job, progress)
                progress.step("swap", f"moving the new environment into {job.layout.prefix}")
                swap(job.staging, job.layout, check=_works_at)
            except OSError as exc:
                raise InstallError(describe_os_error(job.layout, exc)) from exc
            finally:
                if job.staging.exists():
                    remove_tree(job.staging)
    progress.step("done", f"row {record['row']['id']} installed in {job.layout.prefix}")
    seconds = round(time.monotonic() - progress.start, 3)
    return {
        "ok": True,
        "seconds": seconds,
        "manifest": record,
        "steps": progress.steps,
        "import": report.to_json()["import"],
    }

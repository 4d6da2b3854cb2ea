"""`verl-setup install`: plan, build a venv beside the prefix with uv, verify, record, swap in.

The old environment at the prefix is replaced only by a new one that verified, in one atomic
exchange (staging.py); an interrupted run leaves the old one in place and its staging dir for
the next run to clean. Progress: one line per step on stderr, with the elapsed time.
"""

from __future__ import annotations

import contextlib
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
from verl_setup.errors import InstallError
from verl_setup.host.facts import PythonInterpreter
from verl_setup.lock import Lock, read_lock, uv_error
from verl_setup.matrix.select import Plan
from verl_setup.runner import Completed, ProgramError, stream
from verl_setup.staging import (
    Layout,
    check_prefix,
    clean_leftovers,
    describe_os_error,
    install_lock,
    remove_tree,
    swap,
)
from verl_setup.verify import (
    MANIFEST,
    Expected,
    Report,
    Snapshot,
    from_lock,
    from_requirements,
    last_line,
    verify_env,
)

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


def choose_python(wanted: str, found: Sequence[PythonInterpreter], *, allow_downloads: bool) -> PythonChoice:
    """The exact version if detected; else uv's managed one if allowed; else the same minor, warned."""
    usable = [p for p in found if p.implementation == "cpython" and p.mismatch is None]
    usable.sort(key=lambda p: SOURCE_ORDER.index(p.source) if p.source in SOURCE_ORDER else len(SOURCE_ORDER))
    exact = [p for p in usable if p.version == wanted]
    if exact:
        return PythonChoice(request=exact[0].path, version=wanted, source=exact[0].source)
    minor = ".".join(wanted.split(".")[:2])
    if allow_downloads:
        return PythonChoice(
            request=wanted, version=wanted, source="uv (a managed Python, downloaded if needed)"
        )
    same = sorted(
        (p for p in usable if p.version.startswith(minor + ".")),
        key=lambda p: tuple(int(x) for x in p.version.split(".") if x.isdigit()),
    )
    if same:
        p = same[-1]
        warning = None
        if wanted != minor:
            warning = (
                f"Python {wanted} not found; using {p.version} ({p.path}, {p.source}). Run the same exact "
                f"version on every Ray node, or pass --allow-python-downloads to get {wanted} from uv"
            )
        return PythonChoice(request=p.path, version=p.version, source=p.source, warning=warning)
    exact_name = wanted if wanted != minor else f"{minor}.x"
    raise InstallError(
        f"no Python {minor} found (looked on PATH, in pyenv's versions folder and among uv-managed "
        f"Pythons): install Python {exact_name} (`uv python install {wanted}` or `pyenv install "
        f"{exact_name}`), or pass --allow-python-downloads to let uv download it"
    )


class Progress:
    """One line per step on stderr, with the seconds since the command started."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.steps: list[dict[str, Any]] = []

    def say(self, message: str) -> None:
        """Print one progress line."""
        sys.stderr.write(f"[{time.monotonic() - self.start:6.1f}s] {message}\n")
        sys.stderr.flush()

    def step(self, name: str, message: str) -> None:
        """Start a named step (its duration is reported in --json)."""
        now = time.monotonic() - self.start
        if self.steps:
            self.steps[-1]["seconds"] = round(now - self.steps[-1]["at"], 3)
        self.steps.append({"step": name, "at": round(now, 3)})
        self.say(f"{name}: {message}")


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


def uv_commands(
    uv: str, staging: Path, choice: PythonChoice, plan: Plan, lock: Lock | None
) -> list[list[str]]:
    """The exact uv commands an install runs."""
    from verl_setup.uv import install_command, sync_command, venv_command  # noqa: PLC0415

    python_exe = staging / "bin" / "python"
    venv = venv_command(uv, path=staging, python=choice.request)
    if lock is not None:
        return [
            venv,
            sync_command(uv, python_exe=python_exe, lock=lock.path.absolute(), index_url=lock.index_url),
        ]
    inputs = staging / INPUTS
    overrides = inputs / "overrides.txt" if plan.row.overrides else None
    return [
        venv,
        install_command(
            uv,
            python_exe=python_exe,
            requirements=inputs / "requirements.in",
            overrides=overrides,
            index_url=plan.index_url,
        ),
    ]


@dataclass(frozen=True, kw_only=True)
class Job:
    """Everything an install decided before touching the disk."""

    plan: Plan
    lock: Lock | None
    wanted: str
    layout: Layout
    choice: PythonChoice
    staging: Path
    commands: list[list[str]]
    uv: str
    uv_env: dict[str, str]
    env: Mapping[str, str]
    import_timeout: float | None


def prepare(args: Any, env: Mapping[str, str], progress: Progress) -> Job:
    """Plan, check the prefix, choose the interpreter, build the uv commands."""
    from verl_setup.host.pythons import detect_pythons  # noqa: PLC0415
    from verl_setup.planning import plan_from_args  # noqa: PLC0415
    from verl_setup.uv import find_uv, uv_env  # noqa: PLC0415

    lock = read_lock(args.lock) if args.lock else None
    plan = plan_from_args(args, env)
    row = plan.row
    engine = "no engine" if row.engine.name == "none" else f"{row.engine.name} {row.engine.version}"
    if lock is None:
        progress.step("plan", f"row {row.id} (verl {row.verl.version}, {engine}, torch {row.torch.version})")
    else:
        progress.step("plan", f"lock {lock.path.name}: row {lock.row_id}, Python {lock.python}")
        if lock.row_id != row.id:
            progress.say(f"warning: the lock is for row {lock.row_id}; this machine's plan selects {row.id}")
    for warning in plan.warnings:
        progress.say(f"warning: {warning}")
    wanted = lock.python if lock else plan.python
    prefix = Path(args.prefix).expanduser().absolute()
    prefix = prefix.resolve() if prefix.is_symlink() else prefix
    check_prefix(prefix)
    uv = find_uv()
    found = (  # planning already detected this machine's interpreters, unless it read a host file
        plan.target.host_pythons
        if plan.target.local
        else detect_pythons(env.get("PATH", os.defpath), Path(env.get("HOME") or Path.home()), dict(env))
    )
    choice = choose_python(wanted, found, allow_downloads=args.allow_python_downloads)
    progress.step("python", f"{choice.version} from {choice.source} ({choice.request})")
    if choice.warning:
        progress.say(f"warning: {choice.warning}")
    layout = Layout(prefix=prefix)
    staging = layout.staging(os.getpid())
    return Job(
        plan=plan,
        lock=lock,
        wanted=wanted,
        layout=layout,
        choice=choice,
        staging=staging,
        commands=uv_commands(uv, staging, choice, plan, lock),
        uv=uv,
        uv_env=uv_env(python_downloads=args.allow_python_downloads, base=env),
        env=env,
        import_timeout=None if args.no_import else args.import_timeout,
    )


def build(job: Job, progress: Progress) -> tuple[dict[str, Any], Report]:
    """Create, fill and verify the staging venv, and write its manifest."""
    from verl_setup.uv import write_inputs  # noqa: PLC0415

    row, lock, layout = job.plan.row, job.lock, job.layout
    progress.step("venv", f"creating {job.staging.name} beside {layout.prefix.name}")
    _run_uv(job.commands[0], what="uv venv", job=job, tty=False, timeout=VENV_TIMEOUT_S)
    if lock is None:
        write_inputs(row, job.staging / INPUTS)
    progress.step("install", f"{'syncing the lock' if lock else 'installing the pins'} with uv")
    _run_uv(job.commands[1], what="uv pip", job=job, tty=sys.stderr.isatty(), timeout=INSTALL_TIMEOUT_S)
    progress.step(
        "verify", "installed versions" + ("" if job.import_timeout is None else ", then import verl")
    )

    def expected_for(snap: Snapshot) -> Expected:
        if lock is not None:
            return from_lock(lock, snap.markers)
        return from_requirements(f"row {row.id}", row.requirements())

    python = job.staging / "bin" / "python"
    report = verify_env(python, expected_for, import_timeout=job.import_timeout, env=job.env)
    if not report.ok:
        sys.stderr.write(report.text())
        raise InstallError(f"the new environment failed verification: {report.summary()}")
    progress.step("manifest", f"{MANIFEST}: {len(report.snapshot.versions())} distributions")
    record = manifest(job, report)
    (job.staging / MANIFEST).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record, report


def manifest(job: Job, report: Report) -> dict[str, Any]:
    """The record written into the venv: what was asked, what was used, what got installed."""
    from verl_setup.uv import uv_version  # noqa: PLC0415

    plan, lock, snap, choice = job.plan, job.lock, report.snapshot, job.choice
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
        "platform": snap.platform,
        "facts": plan.target.facts_json(),
        "warnings": list(plan.warnings) + ([choice.warning] if choice.warning else []),
        "distributions": dict(sorted(snap.versions().items())),
    }


def _run_uv(argv: list[str], *, what: str, job: Job, tty: bool, timeout: float) -> Completed:
    try:
        out = stream(argv, timeout=timeout, env=job.uv_env, passthrough=tty)
    except ProgramError as exc:
        raise InstallError(f"{what}: {exc}") from exc
    if out.returncode == 0:
        return out
    if tty:
        raise InstallError(f"{what} failed (exit {out.returncode}); uv's messages are above")
    if "No space left on device" in out.stderr:
        raise InstallError(describe_os_error(job.layout, OSError(errno.ENOSPC, "No space left on device")))
    message = uv_error(out.stderr)
    if "Hash mismatch" in out.stderr:
        raise InstallError(
            f"uv refused the lock: {message} (the lock was altered, or the index serves another file)"
        )
    raise InstallError(f"{what} failed: {message}")


def _works_at(prefix: Path) -> None:
    """After the swap: the moved venv runs and knows where it is."""
    out = stream([str(prefix / "bin" / "python"), "-c", "import sys; print(sys.prefix)"], timeout=60)
    if out.returncode != 0 or Path(out.stdout.strip()) != prefix:
        found = out.stdout.strip() or last_line(out.stderr)
        raise InstallError(f"the new environment does not run at {prefix} ({found})")


def dry_run(job: Job, out: TextIO) -> None:
    """Print what an install would run, changing nothing."""
    row = job.plan.row
    what = f"row {row.id}" if job.lock is None else f"lock {job.lock.path} (row {job.lock.row_id})"
    out.write(f"# install {what} into {job.layout.prefix} (dry run: nothing is changed)\n")
    if job.lock is None:
        out.write("".join(f"#   {line}\n" for line in row.requirements()))
    out.write("".join(shlex.join(c) + "\n" for c in job.commands))
    out.write(f"# then: verify, write {MANIFEST}, swap {job.staging.name} into {job.layout.prefix}\n")


def command(args: Any, env: Mapping[str, str], out: TextIO) -> int:
    """`verl-setup install`: see the module docstring."""
    with _sigterm_unwinds():
        return _install(args, env, out)


def _install(args: Any, env: Mapping[str, str], out: TextIO) -> int:
    progress = Progress()
    job = prepare(args, env, progress)
    if args.dry_run:
        dry_run(job, out)
        return 0
    with install_lock(job.layout, wait_s=args.wait, say=progress.say):
        clean_leftovers(job.layout, progress.say)
        try:
            record, report = build(job, progress)
            progress.step("swap", f"moving the new environment into {job.layout.prefix}")
            swap(job.staging, job.layout, check=_works_at)
        except OSError as exc:
            raise InstallError(describe_os_error(job.layout, exc)) from exc
        finally:
            if job.staging.exists():
                remove_tree(job.staging)
    progress.step("done", f"row {record['row']['id']} installed in {job.layout.prefix}")
    if args.json:
        seconds = round(time.monotonic() - progress.start, 3)
        result = {"schema": 1, "ok": True, "seconds": seconds, "manifest": record, "steps": progress.steps}
        result["import"] = report.to_json()["import"]
        out.write(json.dumps(result, indent=2) + "\n")
    return 0

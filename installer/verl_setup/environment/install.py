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
import signal
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from packaging.utils import canonicalize_name

from verl_setup.environment.accelerator_imports import imports_need_absent_toolkit
from verl_setup.environment.closure_moves import GoneWatch
from verl_setup.environment.install_job import (
    INPUTS,
    Command,
    InstallOptions,
    Job,
    dry_run_json,
    prepare,
    uv_commands,
    write_dry_run,
)
from verl_setup.environment.staging import (
    clean_leftovers,
    describe_os_error,
    install_lock,
    remove_tree,
    swap,
)
from verl_setup.environment.user_install import resolve_user_packages
from verl_setup.environment.uv import uv_error
from verl_setup.errors import InstallError, Stopped
from verl_setup.output import Progress
from verl_setup.plan.steps import ExtensionPlan
from verl_setup.scripts import script_path
from verl_setup.util.runner import Completed, ProgramError, stream
from verl_setup.util.secrets import mask

if TYPE_CHECKING:
    from verl_setup.environment.verify import Expected, Report, Snapshot

_SIGNALS = {s.value for s in signal.Signals}
# What the steps after uv need: imported while uv installs, when the main thread only waits.
_AFTER_UV = ("verl_setup.environment.verify", "verl_setup.environment.manifest")
VENV_TIMEOUT_S = 300.0
INSTALL_TIMEOUT_S = 3600.0


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """SIGTERM runs the same cleanup as Ctrl-C (a SIGKILL leaves it to the next run)."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        raise Stopped(signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def build(job: Job, progress: Progress) -> tuple[Job, dict[str, Any], Report]:
    """Create, fill and verify the staging venv, and write its manifest."""
    from verl_setup.environment.uv import write_inputs  # noqa: PLC0415

    row, lock, layout = job.plan.row, job.lock, job.layout
    progress.step(
        "venv", f"creating {job.staging.name} beside {layout.prefix.name} (Python {job.choice.version})"
    )
    tty = sys.stderr.isatty()
    closure = None if lock or job.bundle or job.upgrade else job.recipe.closure
    watch = GoneWatch(closure, job.uv, job.uv_env, watch=tty)  # captured, uv's own warnings name a yank
    job = _make_venv(job, progress)
    from verl_setup.environment.user_lock import requirement_lines  # noqa: PLC0415

    final = job.recipe.step("verl")
    lines = requirement_lines(final.requirements) if final else None
    write_inputs(
        row,
        job.staging / INPUTS,
        lines,
        overrides_lines=job.recipe.overrides,
        constraints=job.recipe.constraints,
    )
    if job.kept:
        from verl_setup.environment.keep import copy_kept  # noqa: PLC0415

        progress.step("keep", f"{', '.join(job.kept)} as the environment at {layout.prefix} has it")
        copy_kept(job.kept, job.staging)
    _import_in_background(_AFTER_UV)
    for command in job.commands[1:]:
        title = command.step.title if command.step else f"syncing {lock.path.name if lock else 'the lock'}"
        if command.what in ("local", "git"):  # the lock's header steps (environment/user_lock.py)
            title = f"your {'checkouts' if command.what == 'local' else 'git refs'}, after the lock's wheels"
        progress.step(command.what, title)
        if command.what == "flash-attn" and job.recipe.flash_attn and job.recipe.flash_attn.mode == "wheel":
            _check_abi(job)
        if tty:
            progress.end_line()  # uv draws its own progress bars below the status line
        try:
            done = _run_uv(command, job=job, tty=tty, timeout=INSTALL_TIMEOUT_S)
        except InstallError:
            watch.after_failure()  # uv failing on a deleted closure release: name it instead
            raise
        watch.after_step(done.stderr)
        ext = job.recipe.extension(command.what)
        if ext is not None and ext.mode in ("wheel", "build"):
            _check_extension(job, ext, progress)
    watch.finish()
    report = _verify_staging(job, progress)
    from verl_setup.environment.manifest import manifest  # noqa: PLC0415
    from verl_setup.environment.verify import MANIFEST  # noqa: PLC0415

    progress.step("manifest", f"{MANIFEST}: {len(report.snapshot.versions())} distributions")
    record = manifest(job, report)
    (job.staging / MANIFEST).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return job, record, report


def _verify_staging(job: Job, progress: Progress) -> Report:
    """The staging venv against the row (or the lock), then the import probe; InstallError when
    it fails, after printing the report."""
    from verl_setup.environment.verify import from_lock, from_requirements, verify_env  # noqa: PLC0415

    row, lock = job.plan.row, job.lock
    no_toolkit = imports_need_absent_toolkit(row, job.env)
    import_timeout = None if no_toolkit else job.import_timeout
    progress.step(
        "verify",
        "installed versions"
        + (
            f" only: {no_toolkit}"
            if no_toolkit
            else ""
            if import_timeout is None
            else ", then the import probe"
        ),
    )

    def expected_for(snap: Snapshot) -> Expected:
        if lock is not None:
            return from_lock(lock, snap.markers)
        pins = from_requirements(f"row {row.id}", list(job.recipe.verify_pins))
        mine = job.recipe.user.requirements
        return dataclasses.replace(pins, editables=tuple(str(r.path) for r in mine if r.editable and r.path))

    python = job.staging / "bin" / "python"
    report = verify_env(
        python,
        expected_for,
        import_timeout=import_timeout,
        env=job.env,
        engine=row.engine.name,
        gpu_only=row.gpu_only_imports,
        known=row.known_broken_imports,
        left_out={
            **job.plan.matrix.rows_file.left_out_modules(
                e.name for e in job.recipe.extensions if e.mode == "without"
            ),
            **job.recipe.left_out_sources_modules(),
        },
    )
    if not report.ok:
        sys.stderr.write(report.text())
        raise InstallError(f"the new environment failed verification: {report.summary()}")
    return report


def _import_in_background(modules: tuple[str, ...]) -> None:
    """Import `modules` in a thread (a failure is left to the import that needs the module)."""
    import importlib  # noqa: PLC0415
    import threading  # noqa: PLC0415

    def load() -> None:
        for name in modules:
            with contextlib.suppress(Exception):
                importlib.import_module(name)

    threading.Thread(target=load, name="verl-setup-imports", daemon=True).start()


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
        job,
        choice=fallback,
        commands=uv_commands(job.uv, job.staging, fallback, job.recipe, job.lock, bundle=job.bundle),
    )
    _run_uv(job.commands[0], job=job, tty=False, timeout=VENV_TIMEOUT_S)
    return job


def _check_extension(job: Job, ext: ExtensionPlan, progress: Progress) -> None:
    """A compiled extension just landed: its ELF symbols against the staging env's torch (no GPU,
    no import). A wheel built for another torch stops the install here, before the swap."""
    from verl_setup.environment.abi import check_environment  # noqa: PLC0415

    report = check_environment(job.staging / "bin" / "python")
    progress.step(
        "abi", f"{ext.name}: {len(report.checked)} compiled modules read against the installed torch"
    )
    # Only this package's modules decide here; the rest of the environment is verify's to judge.
    names = {canonicalize_name(n) for n in (ext.name, ext.distribution) if n}  # a whole wheel's too
    mine = [f for f in report.findings if f.distribution and canonicalize_name(f.distribution) in names]
    if mine:
        found = mine[0]
        where = f" (from {ext.source}: {mask(ext.url or '')})" if ext.source else ""
        raise InstallError(f"{found.message}{where}; nothing was changed")


def _check_abi(job: Job) -> None:
    """The prebuilt flash-attn wheel was chosen for a C++ ABI: the installed torch must have it."""
    from verl_setup.environment.verify import last_line  # noqa: PLC0415

    fa = job.recipe.flash_attn
    out = stream(
        [str(job.staging / "bin" / "python"), str(script_path("torch_abi"))], timeout=300, env=job.env
    )
    if fa is None or out.returncode != 0:
        raise InstallError(f"cannot read the installed torch's C++ ABI: {last_line(out.stderr)}")
    have = out.stdout.strip() == "1"
    if have != fa.cxx11abi:
        raise InstallError(
            f"the installed torch uses C++11 ABI {str(have).upper()}, the flash-attn wheel chosen for it "
            f"{str(fa.cxx11abi).upper()}: the matrix's cxx11abi_from_torch is wrong for this torch"
        )


def _no_space(job: Job, stderr: str, env: Mapping[str, str]) -> str:
    """uv ran out of disk: on the uv cache's filesystem or the prefix's, whichever uv names or is
    the full one (a full cache is not the prefix's fault)."""
    from verl_setup.environment.uv import cache_dir  # noqa: PLC0415

    cache = cache_dir(job.uv, env)
    if cache is not None and _cache_is_full(cache, job, stderr):
        return (
            f"no space left on the filesystem of the uv cache {cache}: free some (`uv cache prune`) or "
            f"point UV_CACHE_DIR at a bigger disk; {job.layout.prefix} is untouched"
        )
    return describe_os_error(job.layout, OSError(errno.ENOSPC, "No space left on device"))


def _cache_is_full(cache: Path, job: Job, stderr: str) -> bool:
    """Which disk ran out: the one that is full now; else the one uv was writing to. uv names the
    cache in its error as the *source* of a copy into the environment (D1), so the prefix is the
    culprit whenever uv names the staging folder too."""
    cache_full, prefix_full = _full(cache), _full(job.layout.parent)
    if cache_full != prefix_full:
        return cache_full
    return str(cache) in stderr and str(job.staging) not in stderr


def _full(path: Path) -> bool:
    """Less than 1% or 64 MiB free on the filesystem of `path` (or its nearest existing parent)."""
    for candidate in (path, *path.parents):
        try:
            stat = os.statvfs(candidate)
        except OSError:
            continue
        free = stat.f_bavail * stat.f_frsize
        return free < max(64 * 2**20, stat.f_blocks * stat.f_frsize // 100)
    return False


def _stopped(signum: int, prefix: Path, *, swapped: bool) -> str:
    """What a signal left: the old environment, or (after the swap) the new one."""
    how = "interrupted" if signum == signal.SIGINT else "stopped"
    name = signal.Signals(signum).name
    if swapped:
        return f"{how} by {name} after the new environment was moved into {prefix}"
    return f"{how} by {name}: {prefix} is untouched (the half-built environment was removed)"


def _run_uv(command: Command, *, job: Job, tty: bool, timeout: float) -> Completed:
    from verl_setup.environment.uv import explain_failure  # noqa: PLC0415

    env = dict(job.uv_env, **dict(command.env))
    try:
        out = stream(command.argv, timeout=timeout, env=env, passthrough=tty)
    except ProgramError as exc:
        raise InstallError(f"uv ({command.what}): {exc}") from exc
    if out.returncode == 0:
        return out
    if out.returncode < 0:  # uv's own messages name a staging dir that is gone by now
        name = signal.Signals(-out.returncode).name if -out.returncode in _SIGNALS else "a signal"
        raise InstallError(
            f"uv ({command.what}) was killed by {name} (signal {-out.returncode}), not stopped by an error "
            f"of its own (the kernel's OOM killer, or another process?); {job.layout.prefix} is untouched"
        )
    if tty:
        raise InstallError(f"uv ({command.what}) failed (exit {out.returncode}); uv's messages are above")
    if "No space left on device" in out.stderr:
        raise InstallError(_no_space(job, out.stderr, env))
    if "Hash mismatch" in out.stderr:
        raise InstallError(
            f"uv refused the lock: {uv_error(out.stderr)} "
            "(the lock was altered, or the index serves another file)"
        )
    raise InstallError(f"uv ({command.what}) failed: {explain_failure(out.stderr)}")


def _works_at(prefix: Path) -> None:
    """After the swap: the moved venv runs and knows where it is."""
    from verl_setup.environment.verify import last_line  # noqa: PLC0415

    out = stream([str(prefix / "bin" / "python"), str(script_path("venv_prefix"))], timeout=60)
    if out.returncode != 0 or Path(out.stdout.strip()) != prefix:
        found = out.stdout.strip() or last_line(out.stderr)
        raise InstallError(f"the new environment does not run at {prefix} ({found})")


def install(
    options: InstallOptions,
    env: Mapping[str, str],
    progress: Progress,
    *,
    dry_run: bool,
    out: TextIO,
    as_json: bool = False,
) -> dict[str, Any] | None:
    """Install (or with `dry_run` print the commands, as JSON data with `as_json`); the result
    object for --json, None after a dry run's text."""
    prefix, swapped = Path(options.prefix).expanduser().absolute(), False
    try:
        with sigterm_unwinds():
            job = prepare(options, env, progress)
            if dry_run and as_json:
                return dry_run_json(job)
            if dry_run:
                write_dry_run(job, out)
                return None
            prefix = job.layout.prefix
            job = resolve_user_packages(job, progress)  # one resolve with the row, before any change
            with install_lock(job.layout, wait_s=options.wait_s, say=progress.say):
                clean_leftovers(job.layout, progress.say)
                try:
                    job, record, report = build(job, progress)
                    progress.step("swap", f"moving the new environment into {job.layout.prefix}")
                    swap(job.staging, job.layout, check=_works_at)
                    swapped = True
                except OSError as exc:
                    raise InstallError(describe_os_error(job.layout, exc)) from exc
                finally:
                    if job.staging.exists():
                        remove_tree(job.staging)
    except (KeyboardInterrupt, Stopped) as exc:
        signum = exc.signum if isinstance(exc, Stopped) else signal.SIGINT
        raise Stopped(signum, _stopped(signum, prefix, swapped=swapped)) from None
    progress.step("done", f"row {record['row']['id']} installed in {job.layout.prefix}")
    seconds = round(time.monotonic() - progress.start, 3)
    return {
        "ok": True,
        "seconds": seconds,
        "manifest": record,
        "steps": progress.steps,
        "import": report.to_json()["import"],
    }

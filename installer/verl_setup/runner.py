"""The one subprocess wrapper: resolves the executable, logs argv, applies a timeout, never hangs."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Completed:
    """What a finished program printed, and how it exited."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


class ProgramError(Exception):
    """A program was missing, timed out, or could not be started."""


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> Completed:
    """Run argv to completion within `timeout` seconds; raise ProgramError if it cannot."""
    exe = argv[0] if os.sep in argv[0] else shutil.which(argv[0])
    if exe is None:
        raise ProgramError(f"{argv[0]}: not found on PATH")
    full = (exe, *argv[1:])
    log.debug("run %s (timeout %.1fs)", full, timeout)
    try:
        # A new session lets a timeout kill the whole group: a hung nvidia-smi may have children
        # that keep the pipes open, and subprocess.run would then wait on them forever.
        proc = subprocess.Popen(
            full,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        raise ProgramError(f"{argv[0]}: {exc.strerror or exc}") from exc
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _kill_group(proc)
        raise ProgramError(f"{argv[0]}: no answer within {timeout:g}s") from exc
    return Completed(argv=full, returncode=proc.returncode, stdout=stdout, stderr=stderr)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()
    # Do not wait on the pipes: a grandchild that escaped the group could hold them forever.
    proc.wait(timeout=5)

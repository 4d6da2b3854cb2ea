"""The one subprocess wrapper: resolves the executable, logs argv, applies a timeout, never hangs,
and reads a child's output under a size cap while it reads (a child that never stops printing
costs that much memory, then it is stopped)."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

MAX_OUTPUT = 16 * 2**20  # bytes of stdout and of stderr kept from one child (a hashed lock: ~1 MB)
_CHUNK = 2**16


@dataclass(frozen=True, kw_only=True)
class Completed:
    """What a finished program printed, and how it exited."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


class ProgramError(Exception):
    """A program was missing, timed out, or could not be started."""

    def __init__(self, message: str, *, stdout: str = "", cut: bool = False) -> None:
        super().__init__(message)
        self.stdout = stdout  # what a timed-out program printed before it was killed
        self.cut = cut  # it printed more than its cap and was stopped


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    limit: int = MAX_OUTPUT,
) -> Completed:
    """Run argv to completion within `timeout` seconds, keeping at most `limit` bytes of each
    stream; raise ProgramError if it cannot (or printed more: "output over N MiB, cut")."""
    return _execute(argv, timeout=timeout, env=env, cwd=cwd, passthrough=False, tied=False, limit=limit)


def stream(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    passthrough: bool = False,
) -> Completed:
    """Like run(), for long steps: the child dies with us (SIGKILL included), Ctrl-C kills it.

    With `passthrough`, the child's stderr is ours (uv draws its progress bars on a terminal)
    and Completed.stderr is empty.
    """
    return _execute(
        argv, timeout=timeout, env=env, cwd=cwd, passthrough=passthrough, tied=True, limit=MAX_OUTPUT
    )


def follow(
    argv: Sequence[str],
    *,
    timeout: float,
    on_line: Callable[[str], None],
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> int:
    """For builds that run for hours: stdout and stderr merged, each line handed to `on_line` as
    it comes; the child dies with us (SIGKILL included), Ctrl-C or the timeout kills its group."""
    exe = argv[0] if os.sep in argv[0] else shutil.which(argv[0])
    if exe is None:
        raise ProgramError(f"{argv[0]}: not found on PATH")
    log.debug("follow %s (timeout %.1fs)", argv, timeout)
    mask = _block(True)
    proc = _start((exe, *argv[1:]), stderr=subprocess.STDOUT, env=env, cwd=cwd, mask=mask, tied=True)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        _kill_group(proc)

    timer = threading.Timer(timeout, expire)
    try:
        _unblock(mask)
        timer.start()
        assert proc.stdout is not None  # noqa: S101  # PIPE was asked for
        for raw in proc.stdout:
            on_line(_text(raw).rstrip("\n"))
        code = proc.wait()
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        timer.cancel()
    if expired.is_set():
        raise ProgramError(f"{argv[0]}: no end within {timeout:g}s")
    return code


def _execute(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None,
    cwd: str | None,
    passthrough: bool,
    tied: bool,
    limit: int,
) -> Completed:
    exe = argv[0] if os.sep in argv[0] else shutil.which(argv[0])
    if exe is None:
        raise ProgramError(f"{argv[0]}: not found on PATH")
    full = (exe, *argv[1:])
    log.debug("run %s (timeout %.1fs)", full, timeout)
    # Ctrl-C or SIGTERM during Popen would leave a started child that nobody kills (Popen keeps
    # no handle on it), still writing into a staging dir while it is deleted: for a tied child
    # they wait until the child is known, then land in the try below, which kills it.
    mask = _block(tied)
    proc = _start(
        full, stderr=None if passthrough else subprocess.PIPE, env=env, cwd=cwd, mask=mask, tied=tied
    )
    deadline = time.monotonic() + timeout
    try:
        _unblock(mask)  # a signal that came during Popen is raised here, with the child known
        out, err, state = _read_bounded(proc, deadline, limit)
        if state == "done":
            proc.wait(timeout=max(0.05, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        state = "late"
    except BaseException:
        # Ctrl-C or SIGTERM reached us, not the child (it has its own session): stop it now.
        _kill_group(proc)
        raise
    finally:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    if state != "done":
        _kill_group(proc)
        if state == "cut":
            message = f"{argv[0]}: output over {limit / 2**20:g} MiB, cut"
        else:
            message = f"{argv[0]}: no answer within {timeout:g}s"
        raise ProgramError(message, stdout=_text(out), cut=state == "cut")
    return Completed(argv=full, returncode=proc.returncode, stdout=_text(out), stderr=_text(err))


def _start(
    full: Sequence[str],
    *,
    stderr: int | None,
    env: Mapping[str, str] | None,
    cwd: str | None,
    mask: set[int | signal.Signals] | None,
    tied: bool,
) -> subprocess.Popen[bytes]:
    try:
        # A new session lets a timeout kill the whole group: a hung nvidia-smi may have children
        # that keep the pipes open, and subprocess.run would then wait on them forever.
        return subprocess.Popen(
            full,
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,
            # A killed parent must not leave uv writing into a staging dir that the next run
            # deletes; the kernel delivers SIGKILL to the child when we die. (preexec_fn forces
            # a plain fork, so the quick probes skip it.)
            preexec_fn=_tie_to_parent(_prctl(), mask) if tied else None,  # noqa: PLW1509  # prctl, mask
        )
    except BaseException as exc:
        # Whatever Popen raised (OSError; ValueError for a NUL in an argument; SubprocessError),
        # the deferred signals come back: left blocked, Ctrl-C would be lost for the rest of this
        # process and for every child it starts (a child inherits the mask).
        _unblock(mask)
        if isinstance(exc, OSError):
            raise ProgramError(f"{full[0]}: {exc.strerror or exc}") from exc
        raise


def _text(data: bytes | bytearray) -> str:
    """Text as Popen's text mode gave it: undecodable bytes replaced, universal newlines."""
    return data.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def _read_bounded(
    proc: subprocess.Popen[bytes], deadline: float, limit: int
) -> tuple[bytearray, bytearray, str]:
    """Read stdout and stderr as they come, until both close ("done"), the deadline passes
    ("late") or one passes `limit` bytes ("cut"): never more than `limit` bytes each in memory."""
    buffers = {"out": bytearray(), "err": bytearray()}
    with selectors.DefaultSelector() as selector:
        for name, pipe in (("out", proc.stdout), ("err", proc.stderr)):
            if pipe is not None:
                selector.register(pipe, selectors.EVENT_READ, name)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return buffers["out"], buffers["err"], "late"
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, _CHUNK)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffer = buffers[key.data]
                room = limit - len(buffer)
                buffer += chunk[:room]
                if len(chunk) > room:
                    return buffers["out"], buffers["err"], "cut"
    return buffers["out"], buffers["err"], "done"


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()
    # Do not wait on the pipes: a grandchild that escaped the group could hold them forever.
    proc.wait(timeout=5)


_PR_SET_PDEATHSIG = 1


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, loaded in the parent: the child between fork and exec may not import."""
    if sys.platform != "linux":
        return None
    import ctypes  # noqa: PLC0415  # only the commands that stream need it

    prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    return prctl


_DEFERRED = (signal.SIGINT, signal.SIGTERM)


def _block(tied: bool) -> set[int | signal.Signals] | None:
    """Defer Ctrl-C and SIGTERM (main thread, tied children only); the previous mask, or None."""
    if not tied or threading.current_thread() is not threading.main_thread():
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)


def _unblock(mask: set[int | signal.Signals] | None) -> None:
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _tie_to_parent(
    prctl: Callable[..., int] | None, mask: set[int | signal.Signals] | None
) -> Callable[[], None]:
    parent = os.getpid()

    def child() -> None:
        if mask is not None:  # the child starts with the signals the parent had before
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)

    return child


@contextlib.contextmanager
def piped(
    argv: Sequence[str], *, stdin: int, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A filter (grep) reading the open file `stdin` from its current offset, its stdout a pipe
    the caller reads at its own pace; on leaving, a child still running is killed (group) and
    reaped, so an exception or Ctrl-C in the caller never leaves it behind."""
    exe = argv[0] if os.sep in argv[0] else shutil.which(argv[0])
    if exe is None:
        raise ProgramError(f"{argv[0]}: not found on PATH")
    log.debug("piped %s", argv)
    try:
        proc = subprocess.Popen(
            (exe, *argv[1:]),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=None if env is None else dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        raise ProgramError(f"{argv[0]}: {exc.strerror or exc}") from exc
    try:
        yield proc
    finally:
        if proc.poll() is None:
            _kill_group(proc)
        if proc.stdout is not None:
            proc.stdout.close()
        proc.wait()

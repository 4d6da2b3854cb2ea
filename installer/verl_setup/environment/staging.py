"""Where a new environment is built and how it replaces the old one: lock, stage, swap, recover.

Everything lives beside the prefix, in its parent directory (one filesystem, so renames are
atomic): `.NAME.verl-setup.lock` (flock), `.NAME.staging-PID` (the venv being built) and, only
where the kernel cannot exchange two paths atomically, `.NAME.old-PID` (the old env during the
swap). While we hold the lock, every staging dir of this prefix belongs to a dead run.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from verl_setup.errors import BadInputError, InstallError

POLL_S = 0.2


@dataclass(frozen=True, kw_only=True)
class Layout:
    """The paths an install into `prefix` uses."""

    prefix: Path

    @property
    def parent(self) -> Path:
        """The directory that holds the prefix and everything beside it."""
        return self.prefix.parent

    @property
    def lock(self) -> Path:
        """The flock file that serialises installs into this prefix."""
        return self.parent / f".{self.prefix.name}.verl-setup.lock"

    def staging(self, pid: int) -> Path:
        """The staging dir of process `pid`."""
        return self.parent / f".{self.prefix.name}.staging-{pid}"

    def backup(self, pid: int) -> Path:
        """The old env's parking place during a two-rename swap."""
        return self.parent / f".{self.prefix.name}.old-{pid}"

    def leftovers(self) -> tuple[list[Path], list[Path]]:
        """Staging dirs and parked old envs of earlier runs of this prefix: matched by exact name
        and owner PID, never as a pattern (a prefix named `env[1]` or `e*` is a name)."""
        staging, parked = f".{self.prefix.name}.staging-", f".{self.prefix.name}.old-"
        found: tuple[list[Path], list[Path]] = ([], [])
        try:
            names = sorted(p.name for p in self.parent.iterdir())
        except OSError:
            return found
        for entry in names:
            for start, out in ((staging, found[0]), (parked, found[1])):
                pid = entry[len(start) :]
                if entry.startswith(start) and pid.isdigit() and pid.isascii() and int(pid) != os.getpid():
                    out.append(self.parent / entry)
        return found


def resolve_prefix(prefix: Path) -> Path:
    """The folder an install writes (a symlink's target); a symlink loop on the way is bad input."""
    for path in (*reversed(prefix.parents), prefix):
        try:
            path.stat()
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise BadInputError(
                    f"--prefix {prefix}: {path} is a symlink loop ({exc.strerror}); "
                    "point --prefix at a real folder"
                ) from exc
    return prefix.resolve() if prefix.is_symlink() else prefix


def check_prefix(prefix: Path) -> None:
    """Refuse a prefix we would harm: anything but a virtual environment or an empty dir."""
    if prefix.is_symlink() or not prefix.exists():
        return
    if not prefix.is_dir():
        raise BadInputError(f"refusing to install into {prefix}: it exists and is not a directory")
    if (prefix / "pyvenv.cfg").is_file() or not any(prefix.iterdir()):
        return
    raise BadInputError(
        f"refusing to replace {prefix}: it is not a virtual environment (no pyvenv.cfg) and not empty"
    )


@contextlib.contextmanager
def install_lock(layout: Layout, *, wait_s: float, say: Callable[[str], None]) -> Iterator[None]:
    """Hold the prefix's flock; wait up to `wait_s` for another install, then fail clearly."""
    try:
        layout.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(layout.lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise InstallError(_cannot_write(layout, exc)) from exc
    try:
        deadline = time.monotonic() + wait_s
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(fd)
                if time.monotonic() >= deadline:
                    raise InstallError(
                        f"another verl-setup install into {layout.prefix} is running{holder}; "
                        "try again when it finishes (or pass --wait SECONDS)"
                    ) from None
                if not told:
                    say(f"waiting for another install into {layout.prefix}{holder} (up to {wait_s:g}s)")
                    told = True
                time.sleep(POLL_S)
        try:  # the holder's pid, for whoever waits; a full disk or quota refuses it (D2)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as exc:
            raise InstallError(describe_os_error(layout, exc)) from exc
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).decode().strip())
        return f" (pid {pid})"
    return ""


def clean_leftovers(layout: Layout, say: Callable[[str], None]) -> None:
    """Remove dead runs' staging dirs; put back an old env a killed swap left parked."""
    staging, parked = layout.leftovers()
    for path in staging:
        say(f"removing {path.name}, left by an interrupted install")
        try:
            remove_tree(path)
        except OSError as exc:
            raise InstallError(
                f"cannot remove {path}, left by an interrupted install: {exc.strerror or exc}"
                f"{f' ({exc.filename})' if exc.filename and str(exc.filename) != str(path) else ''}; "
                f"remove it by hand, then run again ({layout.prefix} is untouched)"
            ) from exc
    for path in parked:
        if not layout.prefix.exists() and not layout.prefix.is_symlink():
            say(f"restoring {layout.prefix.name} from {path.name}, parked by an interrupted swap")
            path.rename(layout.prefix)
        else:
            say(f"removing {path.name}, the environment an interrupted swap replaced")
            remove_tree(path)


def remove_tree(path: Path) -> None:
    """Delete a dir (a half-deleted one is just another leftover for the next run)."""
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():
        shutil.rmtree(path)


def swap(staging: Path, layout: Layout, *, check: Callable[[Path], None]) -> None:
    """Put `staging` at the prefix; `check` the result there; undo everything if anything fails.

    With an old env present the two paths are exchanged in one renameat2(RENAME_EXCHANGE), so a
    kill at any instant leaves either the old env or the verified new one at the prefix.
    """
    prefix = layout.prefix
    if not prefix.exists() and not prefix.is_symlink():
        staging.rename(prefix)
        try:
            check(prefix)
        except BaseException:
            prefix.rename(staging)
            raise
        return
    if _exchange(staging, prefix):
        try:
            check(prefix)
        except BaseException:
            _exchange(staging, prefix)
            raise
        remove_tree(staging)  # now the old env
        return
    backup = layout.backup(os.getpid())
    prefix.rename(backup)
    try:
        staging.rename(prefix)
    except BaseException:
        backup.rename(prefix)
        raise
    try:
        check(prefix)
    except BaseException:
        prefix.rename(staging)
        backup.rename(prefix)
        raise
    remove_tree(backup)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two paths (Linux >= 3.15, glibc >= 2.28); False where unsupported."""
    import ctypes  # noqa: PLC0415  # only the swap needs it

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    rc = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _cannot_write(layout: Layout, exc: OSError) -> str:
    return (
        f"cannot write beside {layout.prefix} (in {layout.parent}): {exc.strerror or exc}; "
        "the new environment is built next to the old one, so that directory must be writable"
    )


def describe_os_error(layout: Layout, exc: OSError) -> str:
    """One line for a filesystem failure during an install."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"no space left on the filesystem of {layout.parent}: the new environment is built "
            "beside the old one and needs room of its own; the old environment is untouched"
        )
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return _cannot_write(layout, exc)
    return f"{exc.filename or layout.prefix}: {exc.strerror or exc}"

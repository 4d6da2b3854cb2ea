"""Error classes, one exit code each (0 ok, 1 unexpected, 2 bad input, 3 no row, 4 install, 5 check)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the fast --help path)
if TYPE_CHECKING:
    from typing import Any


class VerlSetupError(Exception):
    """Base class: a failure the user can act on, printed as one line."""

    exit_code = 1

    def __init__(self, message: str = "", *, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.data = data  # what the command found before failing: the `data` of its --json envelope
        self.reported = False  # its --json envelope is already on stdout


class BadInputError(VerlSetupError):
    """A flag, host file, environment variable or matrix file that cannot be used."""

    exit_code = 2


class NoCompatibleRowError(VerlSetupError):
    """Selection found no matrix row for the host; the message names the nearest rows."""

    exit_code = 3


class InstallError(VerlSetupError):
    """uv, a lock or the staging/swap of an environment failed."""

    exit_code = 4


class CheckFailedError(VerlSetupError):
    """A doctor or verify check failed."""

    exit_code = 5


class Stopped(BaseException):  # a signal, not an error: like KeyboardInterrupt
    """A signal (Ctrl-C, SIGTERM) stopped the run: one line saying what was kept, exit 128 + it."""

    def __init__(self, signum: int, message: str = "") -> None:
        super().__init__(message)
        self.signum = signum

"""The one way results and progress leave the program: a versioned JSON envelope on stdout, and a
progress reporter on stderr (elapsed-time lines on a pipe, a live status line on a terminal,
nothing but warnings under --quiet)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from verl_setup.errors import VerlSetupError
from verl_setup.util.terminal import neutral, raw_stream

# The envelope's version. 2: every --json is {schema, command, ok, error?, data}; 1 was each
# command's own keys beside "schema"; 4 adds detect's accelerators and smoke; 5 detect's OS
# codename and like (ID_LIKE). A command's `data`: schemas/COMMAND.json.
SCHEMA = 5


def envelope(command: str, data: Mapping[str, Any] | None, *, error: VerlSetupError | None = None) -> str:
    """The one JSON document a --json command prints: its result, or its failure and what it had."""
    doc: dict[str, Any] = {"schema": SCHEMA, "command": command, "ok": error is None}
    if error is not None:
        doc["error"] = {"code": error.exit_code, "message": str(error)}
    doc["data"] = None if data is None else dict(data)
    return json.dumps(doc, indent=2) + "\n"


def schema_path(command: str) -> Path:
    """The published JSON Schema of a command's `data` ("envelope" for the envelope itself)."""
    return Path(__file__).parent / "schemas" / f"{command.replace(' ', '-')}.json"


def emit(
    out: TextIO, command: str, data: Mapping[str, Any] | None, error: VerlSetupError | None = None
) -> None:
    """Print the envelope; with an error, raise it afterwards (main then prints only its line)."""
    out.write(envelope(command, data, error=error))
    if error is not None:
        error.reported = True
        raise error


_OPEN: list[Progress] = []  # this run's reporters, for end_status_lines


def end_status_lines() -> None:
    """End every status line still on a terminal (the CLI's last act: the prompt, or the error
    line, must not land on it)."""
    while _OPEN:
        _OPEN.pop().end_line()


def _one(text: str) -> str:
    """A progress line stays one line: a line break from an input cannot fake another (K1)."""
    return neutral(text).replace("\n", "\\n")


class Progress:
    """Steps with the seconds since the command started; the steps are kept for --json."""

    def __init__(self, *, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.start = time.monotonic()
        self.steps: list[dict[str, Any]] = []
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.live = not quiet and self.stream.isatty()
        self._status = False  # a status line is on screen, not yet ended
        self._last_status = float("-inf")  # when status() last wrote
        _OPEN.append(self)

    def elapsed(self) -> float:
        """Seconds since the start, rounded for output."""
        return round(time.monotonic() - self.start, 3)

    def _line(self, text: str, *, keep: bool) -> None:
        if self.live:
            # Overwrite the status line; a line that must stay (a warning) ends it.
            # Our own control sequence goes to the raw terminal; the text is neutral() first.
            raw_stream(self.stream).write("\r\x1b[K" + _one(text) + ("\n" if keep else ""))
            self._status = not keep
        else:
            self.stream.write(_one(text) + "\n")
        self.stream.flush()

    def say(self, message: str) -> None:
        """A line that stays (warnings are printed even under --quiet)."""
        if self.quiet and not message.startswith("warning:"):
            return
        self._line(f"[{time.monotonic() - self.start:6.1f}s] {message}", keep=True)

    def step(self, name: str, message: str) -> None:
        """Start a named step: the status line on a terminal, one line on a pipe."""
        now = time.monotonic() - self.start
        if self.steps:
            self.steps[-1]["seconds"] = round(now - self.steps[-1]["at"], 3)
        self.steps.append({"step": name, "at": round(now, 3)})
        if not self.quiet:
            # The last step stays on screen with its line ended: the prompt comes after it.
            self._line(f"[{now:6.1f}s] {name}: {message}", keep=not self.live or name == "done")

    def status(self, message: str, *, every: float = 30.0) -> None:
        """A running step's progress: redrawn in place on a terminal, a line per `every` s on a pipe."""
        if self.quiet:
            return
        now = time.monotonic()
        if not self.live and now - self._last_status < every:
            return
        self._last_status = now
        self._line(f"[{now - self.start:6.1f}s] {message}", keep=not self.live)

    def end_line(self) -> None:
        """End a status line before something else writes to the terminal (a child's own output)."""
        if self._status:
            self.stream.write("\n")
            self.stream.flush()
            self._status = False

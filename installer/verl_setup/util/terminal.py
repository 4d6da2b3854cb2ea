"""What reaches the terminal: every control character in text the tool echoes from its inputs
(log lines, file names, cluster files, wheel indexes) is shown as an escape, never obeyed (K1).

A log line could otherwise set the window title (OSC 0), write the clipboard (OSC 52), clear the
screen, or move the cursor back with \\r to fake a "verl-setup: done" line. The CLI wraps stdout
and stderr in Neutral once (cli.main), so no call site has to remember; the tool's own status
line (output.Progress: \\r and ESC[K on a terminal) writes below it, to the raw stream.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at start-up (cli.py's budget)
if TYPE_CHECKING:
    from typing import Any, TextIO

# C0 controls but tab and newline, DEL, C1 controls, and the Unicode line and paragraph
# separators, each as a visible escape. Past ASCII the escape is \\uXXXX, which is also what the
# character means inside a JSON string (json.dumps with ensure_ascii=False leaves C1 controls
# raw), so --json stays valid.
_CODES = [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]
_TABLE = {c: (f"\\x{c:02x}" if c < 0x7F else f"\\u{c:04x}") for c in _CODES}


def neutral(text: str) -> str:
    """`text` with each control character as a visible escape (ESC as \\x1b); newlines kept."""
    return text.translate(_TABLE)


class Neutral:
    """A text stream whose writes are neutral(); everything else is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self.raw = stream

    def write(self, text: str) -> int:
        """Write `text` with its control characters escaped."""
        return self.raw.write(neutral(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def raw_stream(stream: TextIO) -> TextIO:
    """The terminal under a Neutral wrapper (for the tool's own control sequences)."""
    return stream.raw if isinstance(stream, Neutral) else stream

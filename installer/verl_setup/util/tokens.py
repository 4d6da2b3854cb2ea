"""The shapes of the words a rows file names (package, version, image, variable, URL): data shared
by a team reaches shell scripts and Dockerfiles, so a field that names something may carry no
control character and no shell metacharacter. Schema fields say their shape with
`Annotated[str, SHAPE]`; the typed builder checks it and reports file, line and key."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    """A kind of word and the pattern a value of it must match whole."""

    what: str
    pattern: re.Pattern[str]
    allowed: str

    def problem(self, value: str) -> str | None:
        """None when `value` has this shape, else why not (one line)."""
        if self.pattern.fullmatch(value):
            return None
        return f"{_show(value)} is not {self.what} (only {self.allowed}; no shell or control characters)"


def _shape(what: str, pattern: str, allowed: str) -> Shape:
    return Shape(what, re.compile(pattern), allowed)


_LETTERS = "letters, digits and"
NAME = _shape("a name", r"[A-Za-z0-9][A-Za-z0-9._+-]*", f"{_LETTERS} . _ + -")
VERSION = _shape("a version", r"[A-Za-z0-9][A-Za-z0-9._+!-]*", f"{_LETTERS} . _ + ! -")
ENV_NAME = _shape("an environment variable name", r"[A-Za-z_][A-Za-z0-9_]*", f"{_LETTERS} _")
IMAGE = _shape(
    "an image reference like registry/name:tag",
    r"[A-Za-z0-9][A-Za-z0-9._/-]*(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?",
    f"{_LETTERS} . _ / - : @",
)
URL = _shape(
    "a URL", r"[A-Za-z][A-Za-z0-9+.-]*://[A-Za-z0-9._~:/@%+=,{}-]+", f"{_LETTERS} . _ ~ : / @ % + = , {{ }} -"
)
OPTION = _shape("a build option", r"[A-Za-z0-9._=:/+,-]+", f"{_LETTERS} . _ = : / + , -")
PATTERN = _shape("a name or path pattern", r"[A-Za-z0-9._/{}+-]+", f"{_LETTERS} . _ / {{ }} + -")
# A variable's value: quoted where it lands, but a Dockerfile ENV or ARG cannot carry a line break.
VALUE = _shape("a one-line value", r"[^\x00-\x1f\x7f]*", "characters that are not control characters")
# A requirement line (an override, a build requirement): PEP 508 needs spaces, quotes, ;, < and >
# in markers, and shell quoting carries those; $, ` and \ have no place in one.
REQUIREMENT = _shape("a requirement", r"[^\x00-\x1f\x7f$`\\\"]+", 'a PEP 508 line without $ ` \\ "')


def _show(value: str) -> str:
    """repr, shortened: a hostile value can be long."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def shape_of(metadata: tuple[object, ...]) -> Shape | None:
    """The Shape in an Annotated hint's metadata, if any."""
    return next((m for m in metadata if isinstance(m, Shape)), None)

"""Parsing of the version strings users and hosts give us: drivers, CUDA, Python, compute capability."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

from verl_setup.errors import BadInputError

_DRIVER_RE = re.compile(r"^\s*(\d{2,4})\.(\d{1,3})(?:\.(\d{1,3}))?\s*$")


@total_ordering
@dataclass(frozen=True)
class DriverVersion:
    """An NVIDIA driver version such as 535.129.03 (the third field is optional: 570.26)."""

    major: int
    minor: int
    patch: int | None = None

    @classmethod
    def parse(cls, text: str) -> DriverVersion:
        """Parse '535.129.03'; raise BadInputError naming the value otherwise."""
        m = _DRIVER_RE.match(text)
        if m is None:
            raise BadInputError(f"bad driver version {text!r}: expected a form like 535.129.03")
        return cls(int(m[1]), int(m[2]), None if m[3] is None else int(m[3]))

    @property
    def _key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, -1 if self.patch is None else self.patch)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, DriverVersion):
            return NotImplemented
        return self._key < other._key

    def __str__(self) -> str:
        # Keep the zero-padded third field as NVIDIA prints it (535.129.03).
        return f"{self.major}.{self.minor:02d}" + ("" if self.patch is None else f".{self.patch:02d}")


def parse_minor(text: str, what: str) -> tuple[int, int]:
    """Parse 'X.Y' (CUDA 12.4, compute capability 9.0, Python 3.10) into a tuple."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text)
    if m is None:
        raise BadInputError(f"bad {what} {text!r}: expected X.Y")
    return int(m[1]), int(m[2])


def parse_python(text: str) -> tuple[int, ...]:
    """Parse a Python request 'X.Y' or 'X.Y.Z'."""
    m = re.fullmatch(r"\s*(3)\.(\d+)(?:\.(\d+))?\s*", text)
    if m is None:
        raise BadInputError(f"bad Python version {text!r}: expected 3.Y or 3.Y.Z")
    return tuple(int(g) for g in m.groups() if g is not None)


def fmt(version: tuple[int, ...]) -> str:
    """Format a version tuple as dotted text."""
    return ".".join(str(part) for part in version)

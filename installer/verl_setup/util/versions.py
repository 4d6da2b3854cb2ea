"""Parsing of the version strings users and hosts give us: drivers, CUDA, Python, compute capability."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

from verl_setup.errors import BadInputError
from verl_setup.util.bounded import one_line

# ASCII digits only ("²" passes str.isdigit() and fails int()), and few of them: a value of
# thousands of digits exceeds int()'s limit. Every number we read from a user goes through here.
_DRIVER_RE = re.compile(r"\s*([0-9]{3,4})\.([0-9]{1,3})(?:\.([0-9]{1,3}))?\s*", re.ASCII)
# Jetson's L4T release (35.3.1, from /etc/nv_tegra_release) is not a discrete-GPU driver.
_L4T_RE = re.compile(r"\s*[0-9]{2}\.[0-9]{1,2}(?:\.[0-9]{1,2})?\s*", re.ASCII)
_MINOR_RE = re.compile(r"\s*([0-9]{1,3})\.([0-9]{1,3})\s*", re.ASCII)
_PYTHON_RE = re.compile(r"\s*(3)\.([0-9]{1,3})(?:\.([0-9]{1,3}))?\s*", re.ASCII)
_COUNT_RE = re.compile(r"\s*([0-9]{1,6})\s*", re.ASCII)


def shown(text: str) -> str:
    """A user's value as an error message quotes it: escaped, one line, cut."""
    return repr(one_line(text, limit=80))


def minor_of(version: str) -> str:
    """The "X.Y" of a version string ("2.11.0+cu130" -> "2.11", "v0.9.1" -> "0.9"); input without
    a minor comes back without its local label ("12" -> "12")."""
    m = re.match(r"\s*v?([0-9]+)\.([0-9]+)", version)
    return f"{m[1]}.{m[2]}" if m else version.split("+", 1)[0]


def parse_count(text: str, what: str, maximum: int) -> int:
    """A whole number 0..maximum in ASCII digits; BadInputError naming the value otherwise."""
    m = _COUNT_RE.fullmatch(text)
    if m is None or int(m[1]) > maximum:
        raise BadInputError(f"bad {what} {shown(text)}: expected a whole number from 0 to {maximum}")
    return int(m[1])


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
        m = _DRIVER_RE.fullmatch(text)
        if m is None and _L4T_RE.fullmatch(text):
            raise BadInputError(
                f"driver {shown(text)} looks like a Jetson L4T release, not a discrete-GPU driver: "
                "the matrix rows do not apply to Jetson"
            )
        if m is None:
            raise BadInputError(
                f"bad driver version {shown(text)}: expected a form like 535.129.03 (or a branch: 580)"
            )
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
    m = _MINOR_RE.fullmatch(text)
    if m is None:
        raise BadInputError(f"bad {what} {shown(text)}: expected X.Y")
    return int(m[1]), int(m[2])


def parse_python(text: str) -> tuple[int, ...]:
    """Parse a Python request 'X.Y' or 'X.Y.Z'."""
    m = _PYTHON_RE.fullmatch(text)
    if m is None:
        raise BadInputError(f"bad Python version {shown(text)}: expected 3.Y or 3.Y.Z")
    return tuple(int(g) for g in m.groups() if g is not None)


def fmt(version: tuple[int, ...]) -> str:
    """Format a version tuple as dotted text."""
    return ".".join(str(part) for part in version)

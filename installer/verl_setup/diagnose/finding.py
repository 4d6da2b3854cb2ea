"""A diagnosis's parts: a class seen in the logs, its evidence lines, and what to do."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from verl_setup.diagnose.rules import ClassId
from verl_setup.diagnose.scan import Hit
from verl_setup.util.bounded import one_line
from verl_setup.util.secrets import mask


@dataclass(frozen=True, kw_only=True)
class LogEvidence:
    """A line that shows the cause: file, 1-based line number, text."""

    path: str
    line: int
    text: str

    def where(self) -> str:
        """file:line."""
        return f"{self.path}:{self.line}"


@dataclass(frozen=True, kw_only=True)
class LogFinding:
    """One class seen in the logs, explained."""

    cls: ClassId
    tier: int
    summary: str
    evidence: tuple[LogEvidence, ...]
    remedy: tuple[str, ...]
    facts: dict[str, str] = field(default_factory=dict)


def near(hit: Hit) -> str:
    """The hit's line and the lines after it, as one text (Ray wraps its messages)."""
    return " ".join((hit.text, *hit.after))


def evidence_of(hits: Sequence[Hit], n: int = 3) -> tuple[LogEvidence, ...]:
    """The first `n` hits as evidence lines (cut to 400 characters)."""
    return tuple(
        LogEvidence(path=one_line(h.path), line=h.number, text=one_line(mask(h.text.strip())))
        for h in hits[:n]
    )

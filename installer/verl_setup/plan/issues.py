"""A row's known issues as plan and install print them: one line each, with an id (`plan
--known-issues` prints them whole)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from verl_setup.matrix.schema import KnownIssue

SHORT = 100  # characters of a known issue's summary in its one-line warning


def issue_id(index: int) -> str:
    """A known issue's id within its row: ki1, ki2, ... in the rows file's order."""
    return f"ki{index + 1}"


def issue_line(index: int, issue: KnownIssue) -> str:
    """The one-line warning for a known issue: its id, the start of its summary, where the rest is."""
    text = issue.summary.split(";")[0]
    if len(text) > SHORT:
        text = text[: text.rfind(" ", 0, SHORT)] + " ..."
    return f"known issue {issue_id(index)}: {text} (all of it: `plan --known-issues`)"

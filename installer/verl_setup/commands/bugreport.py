"""The paste-ready Markdown block of `verl-setup report`: sections in a fixed order, each cut to
a line budget, the whole masked and held under GitHub's comment limit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from verl_setup import __version__
from verl_setup.util.secrets import mask

GITHUB_COMMENT_LIMIT = 65536  # characters GitHub accepts in one issue comment
BUDGET = 60_000  # what the report may use, leaving room for the user's own words
SECTION_LINES = 80
LINE_CHARS = 500


@dataclass(frozen=True, kw_only=True)
class Section:
    """A titled block of plain text (shown as a code block)."""

    title: str
    text: str


def clip(text: str, max_lines: int, line_chars: int = LINE_CHARS) -> str:
    """At most `max_lines` lines of at most `line_chars` characters; says how much was cut."""
    lines = text.rstrip("\n").splitlines()
    cut = [ln if len(ln) <= line_chars else ln[: line_chars - 3] + "..." for ln in lines[:max_lines]]
    if len(lines) > max_lines:
        cut.append(f"... {len(lines) - max_lines} more lines")
    return "\n".join(cut)


def markdown(sections: Sequence[Section], *, env: Mapping[str, str] | None = None, home: bool = False) -> str:
    """One <details> block with a code block per section, masked, under BUDGET characters."""
    lines_each = SECTION_LINES
    while True:
        parts = [f"<details><summary>verl-setup {__version__} report</summary>", ""]
        for s in sections:
            body = clip(mask(s.text, env=env, home=home), lines_each).replace("```", "'''")  # mask, then cut
            parts += [f"### {s.title}", "", "```", body, "```", ""]
        parts.append("</details>")
        out = "\n".join(parts) + "\n"
        if len(out) <= BUDGET or lines_each <= 5:
            return out if len(out) <= BUDGET else out[: BUDGET - 40] + "\n```\n(report cut)\n</details>\n"
        lines_each //= 2

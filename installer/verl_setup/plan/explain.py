"""`plan --explain` in one screen: the facts grouped by where they came from, evidence with equal
texts merged, fitting rows that lost grouped by why, and each hidden detail one flag away
(`--all-rows`, `--known-issues`) named on the screen."""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from verl_setup.matrix.schema import Row
    from verl_setup.plan.select import Plan

from verl_setup.plan.issues import issue_id

WIDTH = 110
_PREFERRED = re.compile(r"^fits, but \S+ is preferred: (.*)$")


def known_issues_text(row: Row) -> str:
    """`plan --known-issues`: every known issue of the row, in full, with its source."""
    if not row.known_issues:
        return f"row {row.id} records no known issue\n"
    lines = []
    for i, issue in enumerate(row.known_issues):
        only = f" (Python {', '.join(issue.python)} only)" if issue.python else ""
        lines += [f"{issue_id(i)}{only}: {issue.summary}", f"    source: {issue.source}"]
    return "\n".join(lines) + "\n"


def _pack(first: str, parts: list[str]) -> list[str]:
    """Parts joined with "; " into lines of at most WIDTH, the first line led by `first`."""
    lines: list[str] = []
    current = ""
    for part in parts:
        if current and len(current) + 2 + len(part) > WIDTH - 11:
            lines.append(current)
            current = part
        else:
            current = f"{current}; {part}" if current else part
    if current:
        lines.append(current)
    return [f"{first if i == 0 else '':<11}{line}" for i, line in enumerate(lines)]


def fact_lines(plan: Plan, short: object) -> list[str]:
    """The facts, one group per source ("flag --driver: driver 580.95.05")."""
    groups: dict[str, list[str]] = {}
    for name, fact in plan.target.facts_json().items():
        value = short(fact["value"]) if callable(short) else str(fact["value"])
        shown = name if value == "-" else f"{name} {value}"
        groups.setdefault(str(fact["source"]), []).append(shown)
    return _pack("facts", [f"{source}: {', '.join(names)}" for source, names in groups.items()])


def evidence_lines(row: Row) -> list[str]:
    """Each pin's evidence; pins with the same text share one line."""
    by_text: dict[str, list[str]] = {}
    for key, text in row.evidence.items():
        by_text.setdefault(text, []).append(key)
    return ["evidence"] + [f"  {', '.join(keys):<28} {text}" for text, keys in by_text.items()]


def row_lines(plan: Plan) -> list[str]:
    """Rows that fit but lost, counted by why; rows that do not fit, grouped by reason."""
    lost: Counter[str] = Counter()
    unfit: dict[str, list[str]] = {}
    for r in plan.rejected:
        m = _PREFERRED.match(r.reasons[0]) if r.reasons else None
        if m and len(r.reasons) == 1:
            lost[m[1].split(" (--prefer")[0].split(":")[0]] += 1
        else:
            unfit.setdefault("; ".join(r.reasons), []).append(r.id)
    lines = []
    if lost:
        why = ", ".join(f"{reason} ({n})" for reason, n in lost.most_common())
        lines.append(f"also fit   {sum(lost.values())} rows, not preferred: {why}")
    for reason, ids in unfit.items():
        lines.append(f"not fit    {', '.join(ids)}: {reason}")
    for u in plan.unfit:
        lines.append(
            f"not offered {u.engine} {', '.join(u.versions)} for verl {u.verl}: {u.reason} ({u.source})"
        )
    lines.append("more       every row with its reasons: `plan --explain --all-rows`; known issues in full: "
                 "`plan --known-issues`")  # fmt: skip
    return lines

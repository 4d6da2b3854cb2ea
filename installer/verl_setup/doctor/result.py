"""What a check returns (status, summary, evidence, remedy) and how a report is printed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from verl_setup.doctor.context import Context

Status = Literal["pass", "warn", "fail", "skip"]
_RANK: dict[Status, int] = {"skip": 0, "pass": 1, "warn": 2, "fail": 3}


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """One value a check read, and where it read it."""

    name: str
    value: str
    source: str


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One problem (or confirmation) inside a check family, with what to do about it."""

    status: Status
    message: str
    remedy: str | None = None


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """The outcome of one check family: the worst finding decides the status."""

    id: str
    status: Status
    summary: str
    evidence: tuple[Evidence, ...] = ()
    remedy: str | None = None
    findings: tuple[Finding, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """One entry of the `checks` list in `doctor --json`."""
        return {
            "id": self.id,
            "status": self.status,
            "summary": self.summary,
            "evidence": [{"name": e.name, "value": e.value, "source": e.source} for e in self.evidence],
            "remedy": self.remedy,
            "findings": [
                {"status": f.status, "message": f.message, "remedy": f.remedy} for f in self.findings
            ],
        }


def skip(check_id: str, reason: str, evidence: Iterable[Evidence] = ()) -> CheckResult:
    """A check that could not apply here, and why."""
    return CheckResult(id=check_id, status="skip", summary=reason, evidence=tuple(evidence))


def fold(
    check_id: str,
    findings: Sequence[Finding],
    evidence: Iterable[Evidence],
    *,
    ok: str,
) -> CheckResult:
    """Combine findings: status and summary from the worst ones, every remedy kept in order."""
    problems = [f for f in findings if f.status in ("warn", "fail")]
    status: Status = max((f.status for f in findings), key=_RANK.__getitem__, default="pass")
    if status == "skip":
        status = "pass"
    if problems:
        worst = [f for f in problems if f.status == status]
        more = len(problems) - 1
        summary = worst[0].message + (f" (and {more} more)" if more else "")
    else:
        summary = "; ".join(f.message for f in findings) or ok
    remedies = [f.remedy for f in problems if f.remedy]
    return CheckResult(
        id=check_id,
        status=status,
        summary=summary,
        evidence=tuple(evidence),
        remedy="\n".join(dict.fromkeys(remedies)) or None,
        findings=tuple(findings),
    )


def report_json(results: Sequence[CheckResult]) -> dict[str, Any]:
    """The `doctor --json` data (schemas/doctor.json)."""
    return {
        "ok": not any(r.status == "fail" for r in results),
        "checks": [r.to_json() for r in results],
    }


def report_text(results: Sequence[CheckResult], *, footer: bool = True) -> str:
    """Human report: one line per check; evidence and remedies for anything not passing; with
    `footer`, doctor's count line."""
    lines = []
    for r in results:
        lines.append(f"{r.status.upper():5} {r.id:11} {r.summary}")
        if r.status == "pass":
            continue
        for f in r.findings:
            if f.message != r.summary.split(" (and ")[0]:
                note = f.status if f.status in ("warn", "fail") else "note"
                lines.append(f"{'':18}{note}: {f.message}")
        for i, e in enumerate(r.evidence):
            label = "evidence" if i == 0 else ""
            lines.append(f"{'':6}{label:12}{e.name} = {e.value}  [{e.source}]")
        if r.remedy:
            for i, text in enumerate(r.remedy.splitlines()):
                lines.append(f"{'':6}{'remedy' if i == 0 else '':12}{text}")
    if footer:
        counts = {s: sum(1 for r in results if r.status == s) for s in ("pass", "warn", "fail", "skip")}
        noun = "check" if len(results) == 1 else "checks"
        lines.append(
            f"doctor: {len(results)} {noun}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        )
    return "\n".join(lines) + "\n"


def env_line(ctx: Context) -> str:
    """The report's first line: which environment the checks looked at, and why that one."""
    target, why = ctx.target
    if target is None:
        return f"doctor: no environment to check ({why})\n"
    return f"doctor: checking {target.prefix} (Python {target.version}, {target.source})\n"

"""Scan every source once and name the first cause: the first root cause (tier 0) in the rules'
order of precedence, else the first symptom, else "unknown" with what was read. Never a guess."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_setup.diagnose.explain import explain
from verl_setup.diagnose.finding import LogFinding
from verl_setup.diagnose.rules import CONTEXT_TIER, RULES, rule_of, triggers
from verl_setup.diagnose.scan import FileScan, Hit, scan_files, scan_text, text_size
from verl_setup.diagnose.sources import Sources
from verl_setup.host.resources import online_cpus
from verl_setup.util.bounded import one_line

MAX_BYTES = 4 << 30  # bytes read in one diagnosis (about 5 s); a larger file is read from its end


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    """The verdict (None: unknown), the other classes seen, and what was read."""

    verdict: LogFinding | None
    others: tuple[LogFinding, ...]
    scans: tuple[FileScan, ...]
    notes: tuple[str, ...]
    seconds: float

    @property
    def cls(self) -> str:
        """The verdict's class id, or "unknown"."""
        return self.verdict.cls if self.verdict else "unknown"

    def to_json(self) -> dict[str, Any]:
        """The diagnosis as the JSON object of `diagnose --json`."""
        return {
            "class": self.cls,
            "verdict": _finding_json(self.verdict) if self.verdict else None,
            "also_seen": [_finding_json(f) for f in self.others],
            "read": [
                {
                    "path": s.path,
                    "bytes": s.size,
                    "lines": s.lines,
                    **({"error": s.error} if s.error else {}),
                    **({"skipped": s.skipped} if s.skipped else {}),
                    **({"from_byte": s.start} if s.start else {}),
                }
                for s in self.scans
            ],
            "notes": list(self.notes),
            "seconds": round(self.seconds, 3),
        }


def _finding_json(f: LogFinding) -> dict[str, Any]:
    return {
        "class": f.cls,
        "tier": "cause" if f.tier == 0 else "symptom",
        "summary": f.summary,
        "evidence": [{"path": e.path, "line": e.line, "text": e.text} for e in f.evidence],
        "remedy": list(f.remedy),
        "facts": f.facts,
    }


def diagnose(sources: Sources, max_bytes: int = MAX_BYTES) -> Diagnosis:
    """Read the sources (streaming, at most `max_bytes` in all, in their order) and decide."""
    start = time.monotonic()
    pattern = triggers()
    notes = list(sources.notes)
    # Each file's share of the byte budget, in reading order; then several files at once (each
    # scan waits on its grep, so threads overlap them on the cores there are).
    plan: list[tuple[Path, int]] = []
    left = max_bytes
    for index, path in enumerate(sources.files):
        if left <= 0:
            notes.append(f"read {max_bytes / 2**30:g} GiB: {len(sources.files) - index} file(s) not read")
            break
        plan.append((path, left))
        left -= text_size(path)
    scans = scan_files(plan, pattern, workers=max(1, min(4, online_cpus() or 1)))
    notes += [
        f"{s.path}: read its last {s.read} bytes (line numbers count from there)" for s in scans if s.start
    ]
    scans += [scan_text(name, text, pattern) for name, text in sources.texts.items()]
    by_class: dict[str, list[Hit]] = {}
    for scan in scans:
        for group, hits in scan.hits.items():
            by_class.setdefault(rule_of(group).id, []).extend(hits)
    files = [s.path for s in scans if s.error is None and s.skipped is None]
    present = [r for r in RULES if r.id in by_class and r.tier < CONTEXT_TIER]
    ordered = sorted(present, key=lambda r: r.tier)  # stable: precedence within a tier
    context: dict[str, list[Hit]] = {
        r.id: by_class[r.id] for r in RULES if r.tier >= CONTEXT_TIER and r.id in by_class
    }
    findings = [
        explain(r.id, by_class[r.id], files, as_verdict=(i == 0), context=context)
        for i, r in enumerate(ordered)
    ]
    notes += [s.error for s in scans if s.error]
    binaries = [s for s in scans if s.skipped]
    notes += [s.skipped for s in binaries[:5] if s.skipped]
    if len(binaries) > 5:
        notes.append(f"... and {len(binaries) - 5} more binary files not read (listed in --json's read)")
    return Diagnosis(
        verdict=findings[0] if findings else None,
        others=tuple(findings[1:]),
        scans=tuple(scans),
        notes=tuple(notes),
        seconds=time.monotonic() - start,
    )


def text_report(d: Diagnosis) -> str:
    """The diagnosis for a terminal: verdict, evidence (file:line), remedy, then the rest."""
    out: list[str] = []
    read = [s for s in d.scans if s.error is None and s.skipped is None]
    size = sum(s.read for s in read)
    lines = sum(s.lines for s in read)
    if d.verdict is None:
        out.append("diagnose: unknown")
        out.append(
            f"  nothing in what was read matches a failure class diagnose knows ({len(read)} file(s), "
            f"{lines} lines); it names no cause it cannot show"
        )
        out += [f"    read {s.path} ({s.lines} lines)" for s in read[:10]]
        if len(read) > 10:
            out.append(f"    ... and {len(read) - 10} more")
    else:
        out += _finding_text(d.verdict, head="diagnose")
    if d.others:
        out.append("also seen (later failures, or symptoms of the cause above):")
        for f in d.others:
            first = f.evidence[0].where() if f.evidence else ""
            out.append(f"  {f.cls}: {f.summary} ({first})")
    out.append(f"read {len(read)} file(s), {size / 2**20:.1f} MiB, {lines} lines in {d.seconds:.1f} s")
    out += [f"note: {n}" for n in d.notes]
    # Each entry one line, whatever a file name or log line held (K1: no faked verdict lines).
    return "\n".join(one_line(line, 4000) for line in out) + "\n"


def _finding_text(f: LogFinding, *, head: str) -> list[str]:
    out = [f"{head}: {f.cls}", f"  {f.summary}", "  evidence:"]
    out += [f"    {e.where()}: {e.text}" for e in f.evidence]
    if f.remedy:
        out.append("  remedy:")
        out += [f"    - {r}" for r in f.remedy]
    return out

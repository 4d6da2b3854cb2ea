"""A smoke report in words: the stages with their seconds, each check, the failure and diagnose's verdict."""

from __future__ import annotations

from verl_setup.smoke.run import SmokeReport

GIB = 1024**3


def report_text(r: SmokeReport) -> str:
    """The report as a reader wants it on a terminal."""
    lines = [f"smoke: {r.target.prefix} (row {r.target.row}, verl {r.target.verl})"]
    lines += [f"  stage {s['stage']:<14} {s['seconds']:7.1f}s" for s in r.stages]
    lines += [f"  {'ok' if c.ok else 'FAIL':<4} {c.name:<12} {c.summary}" for c in r.checks]
    if r.peak:
        lines.append(
            f"  peak memory: {r.peak['pss_bytes'] / GIB:.1f} GiB PSS, "
            f"{r.peak['rss_bytes'] / GIB:.1f} GiB RSS, "
            f"{r.peak['processes']} processes"
        )
    lines.append(f"  {r.seconds:.0f}s in all; run folder {r.work}")
    if r.ok:
        lines.append("smoke: passed (verl's main_ppo trained in this environment)")
        return "\n".join(lines) + "\n"
    lines.append(f"smoke: FAILED in stage {r.failed_stage}: {r.failure}")
    verdict = (r.diagnosis or {}).get("verdict")
    if verdict:
        lines.append(f"diagnose: {verdict['class']}: {verdict['summary']}")
        lines += [f"  remedy: {x}" for x in verdict.get("remedy", [])]
    elif r.diagnosis is not None:
        lines.append("diagnose: no known cause in the run's logs (verdict unknown)")
    return "\n".join(lines) + "\n"

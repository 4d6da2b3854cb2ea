"""Check `pins`: verify's quick pin check (no import probe) on the env doctor inspects: every
distribution the install recorded in its manifest, at the version it recorded.

A `uv pip install -U` that moves one pin (antlr4 4.9.3 -> 4.13.2) leaves every other check green
while verl no longer imports; this check is the one that notices, in about a second.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from verl_setup.doctor.context import Context
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold, skip
from verl_setup.environment.verify import MANIFEST, compare, from_manifest, probe
from verl_setup.errors import CheckFailedError

ID = "pins"
SHOWN = 4  # differences named in the summary; verify lists them all


def check_pins(ctx: Context) -> CheckResult:
    """The env's distributions against its verl-setup manifest."""
    target, why = ctx.target
    if target is None:
        return skip(ID, why)
    prefix = Path(target.prefix)
    manifest = prefix / MANIFEST
    expected = from_manifest(manifest)
    if expected is None:
        return skip(
            ID,
            f"{prefix} has no {MANIFEST} (not installed by verl-setup): nothing recorded to compare; "
            "`verl-setup verify --prefix PATH --lock FILE` compares with a lock",
        )
    try:
        snap = probe(Path(target.python), ctx.env)
    except CheckFailedError as exc:
        return CheckResult(id=ID, status="fail", summary=f"could not list {prefix}'s packages: {exc}")
    findings, notes = compare(snap, expected)
    evidence = [Evidence(name="expected", value=expected.source, source="verl-setup install")]
    verify = f"verl-setup verify --prefix {shlex.quote(str(prefix))}"
    if not findings:
        return fold(
            ID,
            [Finding(status="pass", message=f"{len(expected.pins)} pins as installed ({MANIFEST})")],
            evidence,
            ok="pins as installed",
        )
    shown = "; ".join(" ".join(f.line().split()) for f in findings[:SHOWN])
    more = f"; {len(findings) - SHOWN} more" if len(findings) > SHOWN else ""
    return fold(
        ID,
        [
            Finding(
                status="fail",
                message=f"{len(findings)} of {len(expected.pins)} pins differ from the install: "
                f"{shown}{more}",
                remedy=f"`{verify}` lists every difference and runs the import probe (verl may no "
                f"longer import); `verl-setup install --prefix {shlex.quote(str(prefix))}` restores the "
                "pins (--with/--keep keep packages you added on purpose)",
            ),
            *(Finding(status="skip", message=n) for n in notes[:2]),
        ],
        evidence,
        ok="pins as installed",
    )

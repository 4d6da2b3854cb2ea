"""The row's known issues in full where the launch uses the feature they break (QAT, NVFP4
rollout, Marlin MoE): plan and install show each in one line, since most runs never touch it
(issue 32); a launch that does gets the whole text and its source."""

from __future__ import annotations

import re

from verl_setup.doctor.probes.launch_command import Launch
from verl_setup.doctor.result import Finding
from verl_setup.matrix.schema import Row
from verl_setup.plan.issues import issue_id

# A feature a known issue's summary names, and how a launch override names it (key or value).
FEATURES = {"QAT": r"\bqat\b", "NVFP4": r"nvfp4", "Marlin": r"marlin"}
_OFF = {"false", "0", "null", "none", ""}


def known_issue_findings(row: Row | None, launch: Launch | None) -> list[Finding]:
    """A warning with the full text of each known issue whose feature an override turns on."""
    if row is None or launch is None:
        return []
    out = []
    for i, issue in enumerate(row.known_issues):
        for feature, pattern in FEATURES.items():
            if feature.lower() not in issue.summary.lower():
                continue
            used = next(
                (
                    o
                    for o in launch.overrides
                    if re.search(pattern, o.text, re.IGNORECASE)
                    and (o.value or "").strip().lower() not in _OFF
                ),
                None,
            )
            if used is not None:
                out.append(
                    Finding(
                        status="warn",
                        message=f"this launch uses {feature} ({used.text}); known issue {issue_id(i)} of row "
                        f"{row.id}: {issue.summary}",
                        remedy=f"source: {issue.source}",
                    )
                )
                break
    return out

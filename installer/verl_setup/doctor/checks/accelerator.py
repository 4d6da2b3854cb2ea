"""Check `accelerator`: on an Ascend NPU or AMD GPU host, the devices are visible, CANN's set_env.sh
was sourced, the toolkit matches the row, and Ray's resource name is the accelerator's own.

The variable names are the runtimes' own: ASCEND_RT_VISIBLE_DEVICES (CANN's runtime; Ray's NPU
accelerator manager sets it per worker), HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES (HIP and the ROCm
runtime). CANN's set_env.sh exports ASCEND_TOOLKIT_HOME and ASCEND_HOME_PATH.
"""

from __future__ import annotations

from collections.abc import Mapping

from verl_setup.doctor.context import Context
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold, skip
from verl_setup.host.facts import Accelerator
from verl_setup.util.versions import minor_of

ID = "accelerator"
SET_ENV = "/usr/local/Ascend/ascend-toolkit/set_env.sh"
CANN_HOMES = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH")
VISIBLE = {"ascend": ("ASCEND_RT_VISIBLE_DEVICES",), "rocm": ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")}
# The Ray resource each family's devices are scheduled as (verl's platform layer asks for it).
RAY_RESOURCE = {"ascend": "NPU", "rocm": "GPU"}


def check_accelerator(ctx: Context) -> CheckResult:
    """Visible devices, CANN's environment, toolkit vs row, and the Ray resource name."""
    found = ctx.facts.accelerators
    if not found:
        return skip(ID, "no Ascend NPU or AMD GPU on this host")
    acc = found[0]
    evidence = [
        Evidence(name="accelerator", value=f"{acc.family}: {acc.count} device(s)", source=acc.source),
        Evidence(
            name=acc.toolkit or "toolkit",
            value=acc.toolkit_version or "not found",
            source=acc.toolkit_source or "-",
        ),
    ]
    findings = visible_findings(acc, ctx.env)
    if acc.family == "ascend":
        findings += cann_env_findings(ctx.env)
    findings += toolkit_findings(ctx, acc)
    resource = RAY_RESOURCE[acc.family]
    findings.append(
        Finding(
            status="pass",
            message=f"Ray schedules these devices as resource {resource!r}"
            + (
                " (verl's NPU platform and Ray's NPU accelerator manager): a placement group asking for "
                "'GPU' never schedules on this host"
                if acc.family == "ascend"
                else " (ROCm devices count as GPUs)"
            ),
        )
    )
    return fold(ID, findings, evidence, ok=f"{acc.count} {acc.family} device(s) usable as Ray {resource!r}")


def visible_findings(acc: Accelerator, env: Mapping[str, str]) -> list[Finding]:
    """Each visibility variable names only devices that exist, and none hides them all."""
    out: list[Finding] = []
    for name in VISIBLE[acc.family]:
        value = env.get(name)
        if value is None:
            continue
        items = [v.strip() for v in value.split(",") if v.strip()]
        if not items:
            out.append(
                Finding(
                    status="fail",
                    message=f"{name} is set but empty: it hides every device",
                    remedy=f"unset {name}",
                )
            )
            continue
        bad = [v for v in items if not v.isdigit() or (acc.count and int(v) >= acc.count)]
        if bad:
            out.append(
                Finding(
                    status="fail",
                    message=f"{name}={value} names device(s) {', '.join(bad)}, but this host has {acc.count}",
                    remedy=f"list indices 0..{max(acc.count - 1, 0)} in {name}",
                )
            )
        else:
            out.append(Finding(status="pass", message=f"{name}={value}: {len(items)} of {acc.count} visible"))
    if acc.family == "ascend" and env.get("CUDA_VISIBLE_DEVICES") is not None:
        out.append(
            Finding(
                status="warn",
                message="CUDA_VISIBLE_DEVICES is set on an Ascend host: the NPU runtime ignores it",
                remedy="select NPUs with ASCEND_RT_VISIBLE_DEVICES",
            )
        )
    both = [n for n in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES") if env.get(n)]
    if acc.family == "rocm" and len(both) == 2:
        out.append(
            Finding(
                status="warn",
                message="ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES are both set: HIP's indices count "
                "within the devices ROCR_VISIBLE_DEVICES left",
                remedy="set one of them",
            )
        )
    return out


def cann_env_findings(env: Mapping[str, str]) -> list[Finding]:
    """CANN's set_env.sh exports its home and puts its libraries on LD_LIBRARY_PATH."""
    home = next((env[n] for n in CANN_HOMES if env.get(n)), None)
    if home is None:
        return [
            Finding(
                status="fail",
                message=f"CANN's environment is not set ({' and '.join(CANN_HOMES)} unset): torch_npu "
                "cannot find libascendcl",
                remedy=f"source {SET_ENV} (and ../nnal/atb/set_env.sh) before `ray start` and the launch",
            )
        ]
    if home not in env.get("LD_LIBRARY_PATH", ""):
        return [
            Finding(
                status="warn",
                message=f"CANN's home {home} is set but not on LD_LIBRARY_PATH",
                remedy=f"source {SET_ENV} rather than exporting its variables by hand",
            )
        ]
    return [Finding(status="pass", message=f"CANN's set_env.sh was sourced ({home})")]


def toolkit_findings(ctx: Context, acc: Accelerator) -> list[Finding]:
    """The CANN/ROCm version against the row's tested one (same minor)."""
    row, _ = ctx.row
    family_rows = [r for r in ctx.matrix.rows if r.requires.accelerator == acc.family and r.requires.toolkit]
    if (row is None or row.requires.accelerator != acc.family) and family_rows:
        needs = ", ".join(f"{r.id} needs {r.requires.toolkit}" for r in family_rows)
        return [
            Finding(
                status="fail",
                message=f"{acc.toolkit} {acc.toolkit_version or 'not found'} on this host fits none of this "
                f"matrix's {acc.family} rows ({needs})",
                remedy=f"install the {acc.toolkit} a row names, or see `verl-setup plan --explain`",
            )
        ]
    if row is None or row.requires.accelerator != acc.family or not row.requires.toolkit:
        return [
            Finding(
                status="warn",
                message=f"no {acc.family} row in this matrix to compare {acc.toolkit or 'the toolkit'} with",
            )
        ]
    need, have = row.requires.toolkit, acc.toolkit_version
    if have is None:
        return [
            Finding(
                status="warn",
                message=f"{acc.toolkit} version not found; row {row.id} was tested with {need}",
                remedy=f"source {SET_ENV}" if acc.family == "ascend" else None,
            )
        ]
    if minor_of(have) != minor_of(need):
        return [
            Finding(
                status="fail",
                message=f"{acc.toolkit} {have} on this host, row {row.id} needs {acc.toolkit} {need}",
                remedy=f"install {acc.toolkit} {need} or plan a row for {have}",
            )
        ]
    return [Finding(status="pass", message=f"{acc.toolkit} {have} matches row {row.id} ({need})")]

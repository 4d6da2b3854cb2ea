"""`report`'s use case: what a bug report shows, each part gathered on its own so that one that
cannot be had (no GPU tools, no venv, no row) is named as missing and the rest still comes.

gather_report(request, env) -> BugReport: the host (a recorded host file, else detection), the
plan, verify's text, doctor's quick checks and, given logs, diagnose's verdict. It lives in
diagnose/, the lowest room that may use all of host/, plan/, environment/, doctor/ and diagnose/.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from verl_setup.errors import VerlSetupError
from verl_setup.util.bounded import one_line

if TYPE_CHECKING:
    from verl_setup.diagnose.verdict import Diagnosis
    from verl_setup.doctor.result import CheckResult
    from verl_setup.host.facts import HostFacts
    from verl_setup.plan.make import PlanInputs
    from verl_setup.plan.select import Plan

# Doctor checks that read files and probes only (no throwaway Ray, no collective): seconds.
QUICK_CHECKS = ("python", "cuda", "gpu-memory", "memory", "hf-cache")

T = TypeVar("T")


@dataclass(frozen=True)
class MissingPart:
    """A part that could not be had, and why, as one line."""

    line: str


@dataclass(frozen=True, kw_only=True)
class ReportRequest:
    """What the report covers. `plan` is the plan flags as PlanInputs, or why they are not."""

    plan: PlanInputs | VerlSetupError
    host_file: Path | None = None
    prefix: Path | None = None
    imports: bool = False  # verify's import probe (slow)
    checks: tuple[str, ...] = ()  # doctor's (none: QUICK_CHECKS)
    matrix: Path | None = None
    logs: tuple[Path, ...] = ()


@dataclass(frozen=True, kw_only=True)
class BugReport:
    """Each part, or why it is missing; `diagnosis` is None when no log was given."""

    host: HostFacts | MissingPart
    host_file: Path | None
    plan: Plan | MissingPart
    verify: str | MissingPart
    doctor: list[CheckResult] | MissingPart
    diagnosis: Diagnosis | MissingPart | None


def _safely(what: str, make: Callable[[], T]) -> T | MissingPart:
    """A part, or one line saying why it is missing (a report must not fail)."""
    try:
        return make()
    except VerlSetupError as exc:
        return MissingPart(f"{what} not available: {one_line(str(exc))}")


def _host(host_file: Path | None) -> HostFacts:
    from verl_setup.host.detect import detect  # noqa: PLC0415
    from verl_setup.host.facts import load_host_file  # noqa: PLC0415

    return load_host_file(host_file) if host_file else detect()


def _plan(inputs: PlanInputs | VerlSetupError, env: Mapping[str, str]) -> Plan:
    from verl_setup.plan.make import make_plan  # noqa: PLC0415

    if isinstance(inputs, VerlSetupError):
        raise inputs
    return make_plan(inputs, env)


def _verify(request: ReportRequest, env: Mapping[str, str]) -> str:
    from verl_setup.environment.verify_target import report_verify  # noqa: PLC0415

    return report_verify(request.prefix, env, imports=request.imports)


def _doctor(request: ReportRequest, env: Mapping[str, str]) -> list[CheckResult]:
    from verl_setup.doctor.context import Options  # noqa: PLC0415
    from verl_setup.doctor.run import make_context, run_checks  # noqa: PLC0415
    from verl_setup.plan.target import from_env  # noqa: PLC0415

    options = Options(checks=request.checks or QUICK_CHECKS, prefix=request.prefix, matrix=request.matrix)
    host = from_env(request.host_file, env, "VERL_SETUP_HOST")
    return run_checks(make_context(options, env, host))


def _diagnose(logs: tuple[Path, ...], env: Mapping[str, str]) -> Diagnosis:
    from verl_setup.diagnose.sources import gather  # noqa: PLC0415
    from verl_setup.diagnose.verdict import diagnose  # noqa: PLC0415

    return diagnose(gather(list(logs), env, system=False))


def gather_report(request: ReportRequest, env: Mapping[str, str]) -> BugReport:
    """Every part, in the report's order."""
    return BugReport(
        host=_safely("detect", lambda: _host(request.host_file)),
        host_file=request.host_file,
        plan=_safely("plan", lambda: _plan(request.plan, env)),
        verify=_safely("verify", lambda: _verify(request, env)),
        doctor=_safely("doctor", lambda: _doctor(request, env)),
        diagnosis=_safely("diagnose", lambda: _diagnose(request.logs, env)) if request.logs else None,
    )

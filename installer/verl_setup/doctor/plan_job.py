"""`plan`'s use case: the row for a machine, what it builds against torch, the user's packages,
and with a launch command, whether its training step fits each GPU (doctor's fit planner, which
is why this lives in doctor/: the plan and uv's resolve are below it, the fit check is here).

plan_machine(request, env) -> PlanReport. The fit is estimated first: a bad launch is bad input
before the plan runs. With `explain`, the user's packages are resolved with the row (uv, the
index); otherwise they are named as asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verl_setup.plan.make import PlanInputs, make_plan
from verl_setup.plan.outlook import outlook
from verl_setup.plan.user_packages import UserPackages

if TYPE_CHECKING:
    from verl_setup.doctor.result import CheckResult
    from verl_setup.environment.with_resolve import Resolved
    from verl_setup.plan.select import Plan
    from verl_setup.plan.steps import Choice


@dataclass(frozen=True, kw_only=True)
class FitRequest:
    """--launch: the training command, on which host's GPUs."""

    launch: tuple[str, ...]
    host: Path | None
    matrix: Path | None = None
    config_prefix: Path | None = None


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    """The plan's inputs, and what else `plan` reports about it."""

    inputs: PlanInputs
    extensions: dict[str, Choice] = field(default_factory=dict)
    wheel_sources: tuple[str, ...] = ()
    user: UserPackages = field(default_factory=UserPackages)
    explain: bool = False  # resolve the user's packages with the row
    row_only: bool = False  # the plan alone (its known issues are all that is asked)
    fit: FitRequest | None = None


@dataclass(frozen=True, kw_only=True)
class PlanReport:
    """The plan, its extensions' outlook, the user's packages and the fit estimate, if asked."""

    plan: Plan
    extensions: list[dict[str, Any]] = field(default_factory=list)
    resolved: list[Resolved] = field(default_factory=list)
    fit: CheckResult | None = None

    @property
    def fits(self) -> bool:
        """False when the launch was estimated not to fit (exit 5, as `doctor --check fit`)."""
        return self.fit is None or self.fit.status != "fail"

    def to_json(self) -> dict[str, Any]:
        """The --json data (the envelope's)."""
        extra: dict[str, object] = {"with": [r.to_json() for r in self.resolved]} if self.resolved else {}
        if self.fit is not None:
            extra["fit"] = self.fit.to_json()
        return {**self.plan.to_json(), "extensions": self.extensions, **extra}


def plan_machine(request: PlanRequest, env: Mapping[str, str]) -> PlanReport:
    """Estimate the fit (if asked), plan, then the outlook and the user's packages."""
    fit = None
    if request.fit is not None:
        from verl_setup.doctor.fit_launch import fit_of_launch  # noqa: PLC0415  # doctor's context

        f = request.fit
        fit = fit_of_launch(f.launch, env, host=f.host, matrix=f.matrix, config_prefix=f.config_prefix)
    plan = make_plan(request.inputs, env)
    if request.row_only:
        return PlanReport(plan=plan, fit=fit)
    entries = outlook(plan, requests=request.extensions, wheel_sources=request.wheel_sources, env=env)
    user, resolved = request.user, []
    if user.requirements:
        from verl_setup.environment.with_resolve import Resolved, plan_user_packages  # noqa: PLC0415

        # explain resolves them with the row (uv, the index); a plain plan names them as asked.
        resolved = (
            plan_user_packages(plan, user, env=env)
            if request.explain
            else [Resolved(requirement=r, version=None) for r in user.requirements]
        )
    return PlanReport(plan=plan, extensions=entries, resolved=resolved, fit=fit)

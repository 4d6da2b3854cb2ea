"""PlanInputs -> Plan: load the matrix, build the target facts, select (or take the named row)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from verl_setup.matrix.load import load_matrix
from verl_setup.plan.select import Plan, plan_row, select
from verl_setup.plan.target import Request, build_target, from_env

if TYPE_CHECKING:
    from verl_setup.host.facts import HostFacts


@dataclass(frozen=True, kw_only=True)
class PlanInputs:
    """What a command that plans was told: the target request, the matrix, an optional row."""

    request: Request = field(default_factory=Request)
    matrix: Path | None = None
    row: str | None = None


# Imported when called: a plan from flags reads no host, so it loads neither the probes nor the
# host file's classes.
def _detect() -> HostFacts:
    from verl_setup.host.detect import detect  # noqa: PLC0415

    return detect()


def _load_host(path: Path) -> HostFacts:
    from verl_setup.host.facts import load_host_file  # noqa: PLC0415

    return load_host_file(path)


def make_plan(inputs: PlanInputs, env: Mapping[str, str]) -> Plan:
    """Load the matrix (given, VERL_SETUP_MATRIX, bundled), build the target, select (or take the row)."""
    matrix = load_matrix(from_env(inputs.matrix, env, "VERL_SETUP_MATRIX"))
    target = build_target(inputs.request, env=env, rules=matrix.cuda, detect=_detect, load_host=_load_host)
    return select(target, matrix) if inputs.row is None else plan_row(target, matrix, inputs.row)

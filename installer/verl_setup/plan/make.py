"""PlanInputs -> Plan: load the matrix, build the target facts, select (or take the named row)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from verl_setup.matrix.load import load_matrix
from verl_setup.plan.request import Request
from verl_setup.plan.select import Plan, plan_row, select
from verl_setup.plan.target import Fact, build_target, from_env

if TYPE_CHECKING:
    from verl_setup.host.facts import HostFacts
    from verl_setup.plan.cluster import ClusterPlan


@dataclass(frozen=True, kw_only=True)
class PlanInputs:
    """What a command that plans was told: the target request, the matrix, an optional row."""

    request: Request = field(default_factory=Request)
    matrix: Path | None = None
    row: str | None = None
    # The version a user's verl checkout declares (plan/verl_source.py): it picks the verl line
    # unless --verl (or its variable, or the team config) does.
    verl_checkout: str | None = None


# Imported when called: a plan from flags reads no host, so it loads neither the probes nor the
# host file's classes.
def _detect() -> HostFacts:
    from verl_setup.host.detect import detect  # noqa: PLC0415

    return detect()


def _load_host(path: Path) -> HostFacts:
    from verl_setup.host.facts import load_host_file  # noqa: PLC0415

    return load_host_file(path)


def make_plan(inputs: PlanInputs, env: Mapping[str, str]) -> Plan:
    """Load the matrix (given, VERL_SETUP_MATRIX, the team config's, bundled), build the target,
    select (or take the row: given, else the team config's)."""
    config = inputs.request.config
    given = from_env(inputs.matrix, env, "VERL_SETUP_MATRIX")
    matrix = load_matrix(given or (Path(config["matrix"]) if config.get("matrix") else None))
    target = build_target(inputs.request, env=env, rules=matrix.cuda, detect=_detect, load_host=_load_host)
    row = inputs.row or config.get("row")
    warning = None
    if inputs.verl_checkout is not None and target.verl.value is None:
        from verl_setup.plan.verl_source import verl_line  # noqa: PLC0415

        line, warning = verl_line(inputs.verl_checkout, list(matrix.rows))
        if line is not None:
            source = f"the verl checkout's verl/version/version ({inputs.verl_checkout})"
            target = dataclasses.replace(target, verl=Fact(line, source))
    plan = select(target, matrix) if row is None else plan_row(target, matrix, row)
    return plan if warning is None else dataclasses.replace(plan, warnings=(*plan.warnings, warning))


def make_cluster_plan(inputs: PlanInputs, cluster_file: Path, env: Mapping[str, str]) -> ClusterPlan:
    """One row for every node of `cluster_file` (detect --ray/--slurm): the rows file given, else
    VERL_SETUP_MATRIX, else the bundled one; a cluster no row fits is exit 3 (plan_cluster's)."""
    from verl_setup.host.cluster_file import load_cluster  # noqa: PLC0415
    from verl_setup.plan.cluster import plan_cluster  # noqa: PLC0415

    matrix = load_matrix(from_env(inputs.matrix, env, "VERL_SETUP_MATRIX"))
    return plan_cluster(load_cluster(cluster_file), inputs.request, matrix, env, row=inputs.row)

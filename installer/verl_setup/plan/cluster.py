"""plan --cluster: one row that fits every node of a cluster file, under select's own rules.

Each node becomes a Target from its own facts (the request flags and VERL_SETUP_* request
variables apply to all of them); select.rejection_of judges every row on every node, and select
itself ranks the rows that fit them all. What a node would pick alone, and which nodes keep the
cluster from it, is said next to the choice (a driver-535 node among 580s: the CUDA 12.8 row
for all, or that node's driver upgraded).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_setup.errors import BadInputError, NoCompatibleRowError
from verl_setup.host.cluster_file import Cluster, ClusterNode
from verl_setup.host.facts import HostFacts
from verl_setup.matrix.load import Matrix
from verl_setup.matrix.schema import Row
from verl_setup.plan.cluster_differences import Difference, differences, grouped, nodes_words

# Request variables apply to every node; the ones that describe a machine would override each
from verl_setup.plan.request import Request
from verl_setup.plan.select import Plan, Rejection, nearest_rows, plan_row, rejection_of, select
from verl_setup.plan.target import Fact, Target, build_target
from verl_setup.util.bounded import one_line

# Request variables apply to every node; the ones that describe a machine would override each
# node's own facts, so they are not read for a cluster.
REQUEST_ENV = tuple(f"VERL_SETUP_{n}" for n in ("PYTHON", "VERL", "ENGINE", "BACKEND", "POLICY"))
MACHINE_FLAGS = {
    "driver": "--driver",
    "gpus": "--gpu",
    "sm": "--sm",
    "gpu_count": "--gpu-count",
    "no_gpu": "--no-gpu",
    "arch": "--arch",
    "glibc": "--glibc",
    "host_file": "--host",
}


@dataclass(frozen=True, kw_only=True)
class NodePlan:
    """One node: its target facts and the row it would get on its own (None: none fits it)."""

    node: ClusterNode
    target: Target
    own_row: str | None


@dataclass(frozen=True, kw_only=True)
class Blocker:
    """Nodes that fail a row for the same reasons, and the smallest change that would let it fit."""

    nodes: tuple[str, ...]
    reasons: tuple[str, ...]
    change: str

    def to_json(self) -> dict[str, Any]:
        """For --json."""
        return {"nodes": list(self.nodes), "reasons": list(self.reasons), "change": self.change}


@dataclass(frozen=True, kw_only=True)
class RowVerdict:
    """A row that does not fit every node (or a node's own pick the cluster cannot have)."""

    id: str
    blockers: tuple[Blocker, ...]
    picked_by: tuple[str, ...] = ()  # nodes whose own choice this row is

    def to_json(self) -> dict[str, Any]:
        """For --json."""
        return {
            "id": self.id,
            "picked_by": list(self.picked_by),
            "blockers": [b.to_json() for b in self.blockers],
        }


@dataclass(frozen=True, kw_only=True)
class ClusterPlan:
    """The row for every node, per-node facts, rows the odd nodes hold back, and what differs."""

    plan: Plan
    cluster: Cluster
    nodes: tuple[NodePlan, ...]
    held_back: tuple[RowVerdict, ...]
    differences: tuple[Difference, ...]
    warnings: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The documented `plan --cluster --json` object: the plan's keys plus the cluster's."""
        data = self.plan.to_json()
        data["warnings"] = list(self.warnings)
        data.pop("facts")
        data["cluster"] = {
            "path": str(self.cluster.path) if self.cluster.path else None,
            "how": self.cluster.how,
            "gathered_at": self.cluster.gathered_at,
            "nodes": {
                n.node.name: {
                    "label": n.node.label,
                    "own_row": n.own_row,
                    "facts": n.target.facts_json(),
                }
                for n in self.nodes
            },
            "missing": {m.name: {"ip": m.ip, "reason": m.reason} for m in self.cluster.missing},
            "held_back": [v.to_json() for v in self.held_back],
            "differences": [d.to_json() for d in self.differences],
        }
        return data


def check_request(request: Request) -> None:
    """Flags that describe one machine make no sense for a cluster: each node has its own facts."""
    given = [flag for name, flag in MACHINE_FLAGS.items() if getattr(request, name) not in (None, (), False)]
    if given:
        raise BadInputError(
            f"{given[0]} describes one machine; --cluster plans every node from its own facts in the file"
        )


def node_targets(cluster: Cluster, request: Request, matrix: Matrix, env: Mapping[str, str]) -> list[Target]:
    """Each node's Target, built by plan.target's one precedence (the node's facts as its host file)."""
    check_request(request)
    request_env = {k: env[k] for k in REQUEST_ENV if env.get(k)}
    where = str(cluster.path) if cluster.path else "cluster"

    def target_of(node: ClusterNode) -> Target:
        def load_host(_path: Path) -> HostFacts:
            return node.host

        return build_target(
            dataclasses.replace(request, host_file=Path(f"{where}#{node.label}")),
            env=request_env,
            rules=matrix.cuda,
            detect=_no_detection,
            load_host=load_host,
        )

    return [target_of(node) for node in cluster.nodes]


def _no_detection() -> HostFacts:
    raise AssertionError("a cluster node is never detected here")  # pragma: no cover


def plan_cluster(
    cluster: Cluster, request: Request, matrix: Matrix, env: Mapping[str, str], *, row: str | None = None
) -> ClusterPlan:
    """The best row that fits every node; NoCompatibleRowError naming the blocking nodes if none."""
    targets = node_targets(cluster, request, matrix, env)
    labels = [n.label for n in cluster.nodes]
    # Nodes with the same facts get the same verdicts: each distinct profile is judged once.
    profiles = [_profile(t) for t in targets]
    first = {key: targets[profiles.index(key)] for key in dict.fromkeys(profiles)}
    by_profile = {key: {r.id: rejection_of(r, t, matrix) for r in matrix.rows} for key, t in first.items()}
    verdicts = {r.id: [by_profile[key][r.id] for key in profiles] for r in matrix.rows}
    fitting = [r for r in matrix.rows if not any(verdicts[r.id])]
    if row is not None:
        chosen = matrix.row(row)
    elif not fitting:
        raise NoCompatibleRowError(_no_fit_message(verdicts, labels, matrix, len(cluster.nodes)))
    else:
        # select ranks the rows that fit every node exactly as it ranks one host's fitting rows.
        chosen = select(targets[0], _with_rows(matrix, fitting)).row
    plans = {key: plan_row(t, matrix, chosen.id) for key, t in first.items()}
    owns = {key: _own_row(t, matrix) for key, t in first.items()}
    node_plans = [plans[key] for key in profiles]
    own = [owns[key] for key in profiles]
    nodes = tuple(
        NodePlan(node=n, target=t, own_row=o) for n, t, o in zip(cluster.nodes, targets, own, strict=True)
    )
    rejected = tuple(
        _cluster_rejection(r.id, verdicts[r.id], labels)
        if any(verdicts[r.id])
        else Rejection(id=r.id, reasons=(f"fits every node, but {chosen.id} is preferred",))
        for r in matrix.rows
        if r.id != chosen.id
    )
    plan = dataclasses.replace(node_plans[0], rejected=rejected)
    held = tuple(
        RowVerdict(
            id=row_id,
            picked_by=tuple(label for label, o in zip(labels, own, strict=True) if o == row_id),
            blockers=_blockers(verdicts[row_id], labels, matrix.row(row_id)),
        )
        for row_id in dict.fromkeys(o for o in own if o and o != chosen.id)
        if any(verdicts[row_id])
    )
    warnings = grouped([p.warnings for p in node_plans], labels)
    warnings += [
        one_line(f"node {m.name} ({m.ip or 'no address'}) gave no facts: {m.reason}") for m in cluster.missing
    ]
    return ClusterPlan(
        plan=plan,
        cluster=cluster,
        nodes=nodes,
        held_back=held,
        differences=differences(cluster, plan),
        warnings=tuple(warnings),
    )


def _profile(target: Target) -> tuple[object, ...]:
    """What selection reads from a target: every fact's value (sources name the node, so not them)."""
    facts: tuple[Fact[Any], ...] = (target.driver, target.gpus, target.python, target.glibc, target.arch)
    facts += (target.verl, target.engine, target.policy, target.backend)
    pythons = tuple(p.version for p in target.host_pythons)
    return (*(f.value for f in facts), target.backend.source == "default", pythons)


def _with_rows(matrix: Matrix, rows: list[Row]) -> Matrix:
    return dataclasses.replace(matrix, rows_file=dataclasses.replace(matrix.rows_file, rows=tuple(rows)))


def _own_row(target: Target, matrix: Matrix) -> str | None:
    try:
        return select(target, matrix).row.id
    except NoCompatibleRowError:
        return None


def _blockers(verdicts: list[Rejection | None], labels: list[str], row: Row) -> tuple[Blocker, ...]:
    """The nodes failing `row`, grouped by identical reasons, each group with its smallest change."""
    groups: dict[tuple[str, ...], list[str]] = {}
    changes: dict[tuple[str, ...], str] = {}
    for label, verdict in zip(labels, verdicts, strict=True):
        if verdict is not None:
            groups.setdefault(verdict.reasons, []).append(label)
            changes[verdict.reasons] = _change(verdict, row)
    return tuple(
        Blocker(nodes=tuple(nodes), reasons=reasons, change=changes[reasons])
        for reasons, nodes in sorted(groups.items(), key=lambda kv: len(kv[1]))
    )


def _change(verdict: Rejection, row: Row) -> str:
    """What would make the row fit the node, in the order nearest_rows ranks changes."""
    if verdict.off_request:
        return "ask for it (--verl/--engine/--backend), or it is deprecated"
    if verdict.hardware_change:
        return "other hardware or OS on the node"
    if verdict.python_change:
        return f"use Python {' or '.join(row.python.supported)}"
    if verdict.driver_needed is not None:
        return f"upgrade the node's NVIDIA driver to >= {verdict.driver_needed}"
    return "change the node"  # pragma: no cover  # every rejection has one of the kinds above


def _cluster_rejection(row_id: str, verdicts: list[Rejection | None], labels: list[str]) -> Rejection:
    """One Rejection for the cluster: the kinds of change any node needs, the highest driver."""
    failing = [(label, v) for label, v in zip(labels, verdicts, strict=True) if v is not None]
    drivers = [v.driver_needed for _, v in failing if v.driver_needed is not None]
    reasons: dict[str, list[str]] = {}
    for label, verdict in failing:
        for reason in verdict.reasons:
            reasons.setdefault(reason, []).append(label)
    return Rejection(
        id=row_id,
        reasons=tuple(f"{nodes_words(nodes, len(labels))}: {reason}" for reason, nodes in reasons.items()),
        off_request=any(v.off_request for _, v in failing),
        driver_needed=max(drivers) if drivers else None,
        python_change=any(v.python_change for _, v in failing),
        hardware_change=any(v.hardware_change for _, v in failing),
    )


def _no_fit_message(
    verdicts: dict[str, list[Rejection | None]], labels: list[str], matrix: Matrix, total: int
) -> str:
    combined = [_cluster_rejection(row_id, v, labels) for row_id, v in verdicts.items()]
    nearest = nearest_rows(combined, matrix)

    # Besides the nearest rows, the nearest row each other set of nodes blocks: every way out, so
    # the odd node is named whichever side the ranking puts first.
    def blocking(r: Rejection) -> frozenset[str]:
        return frozenset(label for label, v in zip(labels, verdicts[r.id], strict=True) if v)

    sets: dict[frozenset[str], Rejection] = {blocking(r): r for r in reversed(nearest[:3])}
    for r in nearest:
        if not r.off_request and len(blocking(r)) < total:
            sets.setdefault(blocking(r), r)
    listed = list(dict.fromkeys([*nearest[:3], *list(sets.values())[:6]]))

    def blocked(row_id: str) -> str:
        blockers = _blockers(verdicts[row_id], labels, matrix.row(row_id))
        words = "; ".join(
            f"{nodes_words(b.nodes, total)} ({', '.join(b.reasons)}; {b.change})" for b in blockers
        )
        return f"{row_id} is blocked by {words}"

    return f"no matrix row fits all {total} nodes. Nearest (smallest change first): " + ". ".join(
        blocked(r.id) for r in listed
    )

"""`install --cluster`'s use case: is the prefix's folder shared, install the row (once on a shared
prefix, else on every node in parallel), then `verify --prefix` on each installed node. It
returns the report; the progress goes through the Progress it is given."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_setup.cluster.detect import runtime_env_for, shipped_package
from verl_setup.cluster.install import NodeResult, Reach, Sharing, check_sharing, install_on_nodes
from verl_setup.errors import BadInputError, CheckFailedError, InstallError, VerlSetupError
from verl_setup.output import Progress
from verl_setup.plan.make import PlanInputs


@dataclass(frozen=True, kw_only=True)
class ClusterInstallRequest:
    """The cluster plan's row on every node at `prefix`, each node running `verl-setup install`
    with the row, the plan's exact Python and `node_options`."""

    inputs: PlanInputs  # the plan flags; with the cluster file, the cluster plan
    cluster_file: Path
    python: Path  # the interpreter with the cluster's ray
    ray: str | None  # the Ray head (--ray), else the one the cluster file was gathered through
    prefix: Path  # absolute: the same path on every node
    node_options: tuple[str, ...]  # this run's install options, passed on to each node
    reach: Reach
    timeout: float  # per node
    live: bool  # each node's line as it finishes (not under -q)


@dataclass(frozen=True, kw_only=True)
class ClusterInstallReport:
    """Each node's install and, where any installed, each node's verify."""

    row: str
    python: str
    prefix: Path
    sharing: Sharing
    results: list[NodeResult]
    verified: list[NodeResult] | None  # None: no node installed, none verified

    def to_json(self) -> dict[str, Any]:
        """`install --cluster --json`'s result object."""
        verified = None
        if self.verified is not None:
            bad = [r for r in self.verified if not r.ok]
            verified = {"ok": not bad and bool(self.verified), "nodes": [r.to_json() for r in self.verified]}
        return {
            "ok": all(r.ok for r in self.results) and bool(verified and verified.get("ok")),
            "row": self.row,
            "python": self.python,
            "prefix": str(self.prefix),
            "filesystem": self.sharing.to_json(),
            "nodes": [r.to_json() for r in self.results],
            "verify": verified,
        }

    def error(self) -> VerlSetupError | None:
        """Exit 4 naming each node whose install failed, else 5 naming each that failed verify."""
        failed = [r for r in self.results if not r.ok]
        if failed:
            return InstallError(_failure(failed, len(self.results)))
        bad = [r for r in self.verified or () if not r.ok]
        if bad:
            return CheckFailedError(
                _failure(bad, len(self.verified or ())).replace("install failed", "verify failed")
            )
        return None


def install_cluster(
    request: ClusterInstallRequest, env: Mapping[str, str], progress: Progress
) -> ClusterInstallReport:
    """Plan for the cluster, install on every node (or once, on a shared prefix), then verify the
    installed nodes."""
    from verl_setup.plan.make import make_cluster_plan  # noqa: PLC0415  # the cluster file's classes

    plan = make_cluster_plan(request.inputs, request.cluster_file, env)
    address = request.ray or plan.cluster.address
    if not address:
        raise BadInputError("the cluster file was not gathered through Ray: give --ray ADDRESS")
    prefix, python = request.prefix, request.python
    row, total = plan.plan.row.id, len(plan.nodes)
    install_argv = ["install", "--prefix", str(prefix), "--row", row, "--python", plan.plan.python]
    install_argv += ["--json", "--quiet", *request.node_options]
    progress.step(
        "plan", f"{row} with Python {plan.plan.python} for all {total} nodes of {request.cluster_file}"
    )
    progress.step("filesystem", f"is {prefix.parent} the same folder on every node?")
    sharing = check_sharing(python, address, prefix.parent, env=env, timeout=120)
    progress.say(f"{prefix.parent}: {sharing.words()}")
    where = "once, on the head node (shared prefix)" if sharing.shared else "on every node in parallel"
    progress.step("install", f"{prefix} {where}; one line per node as it finishes")
    progress.end_line()
    with shipped_package() as package:
        runtime_env = runtime_env_for(package if request.reach == "py_modules" else None, None)
        results = install_on_nodes(
            python,
            address,
            install_argv,
            only=("head",) if sharing.shared else (),
            env=env,
            timeout=request.timeout,
            reach=request.reach,
            runtime_env=runtime_env,
            live=request.live,
        )
        for r in results:
            progress.say(
                f"node {r.label}: " + (f"installed in {r.seconds:g}s" if r.ok else f"failed: {r.error}")
            )
        good = [r for r in results if r.ok]
        checked = None
        if good:
            # `verify --prefix` on each node, in a child of its own: a Ray worker started with the
            # env's py_executable also sees the raylet's site-packages (found as duplicates).
            progress.step(
                "verify", "verify --prefix on " + ("every node" if sharing.shared else "each installed node")
            )
            checked = install_on_nodes(
                python,
                address,
                ["verify", "--prefix", str(prefix), "--json", "--no-import"],
                only=() if sharing.shared else tuple(r.node_id for r in good),
                env=env,
                timeout=600,
                reach=request.reach,
                runtime_env=runtime_env,
                live=request.live,
            )
            for r in checked:
                progress.say(f"node {r.label}: " + ("verified" if r.ok else f"verify failed: {r.error}"))
    return ClusterInstallReport(
        row=row, python=plan.plan.python, prefix=prefix, sharing=sharing, results=results, verified=checked
    )


def _failure(failed: list[NodeResult], total: int) -> str:
    lines = [f"install failed on {len(failed)} of {total} nodes (the others keep their result):"]
    lines += [f"  node {r.label}: {r.error}" for r in failed]
    return "\n".join(lines)

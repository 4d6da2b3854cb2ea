"""Check `ray`: can this env reach the head, at the address it will really dial, with matching
Python and Ray versions on every node, and enough GPUs for the launch command?"""

from __future__ import annotations

from typing import Any

from verl_setup.doctor.checks.ray_local import auth_token_findings, check_local_ray, working_dir_findings
from verl_setup.doctor.context import Context
from verl_setup.doctor.probes.ray_probe import CHILD_TIMEOUT, LOOPBACK, RayReading, address_file
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold
from verl_setup.util.versions import minor_of

ID = "ray"
LOOPBACK_FIX = (
    "keep Ray on loopback by exporting RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 before `ray start` and in "
    "every process that connects; for several nodes start the head with "
    "--node-ip-address=<an address every node can reach> and give clients that address"
)


def check_ray(ctx: Context) -> CheckResult:
    """Reachability (with Ray's own address rewriting), versions, and GPUs for the launch."""
    uploads = working_dir_findings(ctx)
    uploads[0].extend(auth_token_findings(ctx))
    reading = ctx.ray
    if reading is None:
        return check_local_ray(ctx, address_file(ctx.env), uploads)
    evidence = [
        Evidence(name="address", value=reading.address, source=reading.source),
        Evidence(name="probe", value=reading.probe_python, source="interpreter that ran the Ray probe"),
    ]
    joined = _joins_recorded_cluster(ctx, reading)
    child = reading.child
    if child is None:
        return fold(
            ID,
            [
                Finding(
                    status="fail",
                    message=f"the Ray probe got no answer within {CHILD_TIMEOUT:g}s ({reading.error}): "
                    "a Ray client here would hang the same way",
                    remedy="check the head with `ray status --address <head>`; " + LOOPBACK_FIX,
                )
            ],
            evidence,
            ok="",
        )
    evidence.append(
        Evidence(name="ray in probe", value=str(child.get("ray")), source=str(child.get("executable")))
    )
    findings: list[Finding] = []
    if reading.kind == "gcs":
        findings += _gcs_findings(ctx, reading, child, evidence)
    elif reading.kind == "client":
        findings += _reach(reading, child, evidence)
    findings += _dashboard(reading, child, evidence)
    findings += uploads[0]
    evidence += uploads[1]
    return fold(ID, joined + findings, evidence, ok=f"Ray head at {reading.address} answers")


def _joins_recorded_cluster(ctx: Context, reading: RayReading) -> list[Finding]:
    """A `ray start` record here and no RAY_ADDRESS: verl's bare ray.init() joins that cluster."""
    if not reading.source.startswith("file ") or ctx.env.get("RAY_ADDRESS"):
        return []
    return [
        Finding(
            status="warn",
            message=f"RAY_ADDRESS is not set but {reading.source.split()[1]} names {reading.address}: "
            "verl's ray.init() joins that cluster instead of starting its own, and hangs if it is gone",
            remedy=f"export RAY_ADDRESS={reading.address} to join it on purpose, or `ray stop` here "
            "(and remove the file) to let verl start a private Ray",
        )
    ]


def _reach(reading: RayReading, child: dict[str, Any], evidence: list[Evidence]) -> list[Finding]:
    """Is the GCS (or Ray client server) listening where this env will dial?"""
    resolved = child.get("resolved", reading.address)
    flag = child.get("cluster_env")
    evidence.append(
        Evidence(
            name="dials",
            value=str(resolved),
            source=f"Ray's own address rules here (node IP {child.get('node_ip')}, "
            f"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER={'unset' if flag is None else flag})",
        )
    )
    tcp_given = child.get("tcp_given") or {}
    tcp_resolved = child.get("tcp_resolved") or {}
    if tcp_resolved.get("ok"):
        return []
    error = tcp_resolved.get("error", "no answer")
    if resolved != _host_port(reading.address) and tcp_given.get("ok"):
        return [
            Finding(
                status="fail",
                message=f"Ray here rewrites {reading.address} to {resolved}, where nothing listens "
                f"({error}); the head listens on {reading.address}: ray.init() would hang",
                remedy="export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 here, as the head had it at "
                "`ray start` (it keeps 127.0.0.1 as 127.0.0.1), or restart the head on a routable "
                "address with --node-ip-address and use that address",
            )
        ]
    if reading.source.startswith("file "):
        return [
            Finding(
                status="fail",
                message=f"no Ray head answers at {resolved} ({error}), the address left in "
                f"{reading.source.split()[1]}: ray.init() would try it and fail",
                remedy="start the head again (`ray start --head ...`), or remove that stale file",
            )
        ]
    return [
        Finding(
            status="fail",
            message=f"cannot reach the Ray GCS at {resolved} ({error})",
            remedy="check that the head runs (`ray status --address <head>`), that the port is open, "
            "and that the head was started with --node-ip-address reachable from here",
        )
    ]


def _gcs_findings(
    ctx: Context, reading: RayReading, child: dict[str, Any], evidence: list[Evidence]
) -> list[Finding]:
    findings = _reach(reading, child, evidence)
    if findings:
        return findings
    if child.get("gcs_error"):
        return [
            Finding(
                status="fail",
                message=f"the GCS at {child.get('resolved')} accepts connections but did not answer: "
                f"{child['gcs_error']}",
                remedy="compare `ray --version` here and on the head; restart the head if it is wedged",
            )
        ]
    gcs = child.get("gcs")
    if not gcs:
        evidence.append(Evidence(name="gcs", value="reachable (TCP)", source="no Ray in the probe's env"))
        return []
    nodes = [n for n in gcs.get("nodes", []) if n.get("alive")]
    evidence.append(
        Evidence(
            name="alive nodes",
            value=", ".join(
                f"{n['address']}{' (head)' if n.get('head') else ''} {n.get('gpus', 0):g} GPU" for n in nodes
            )
            or "none",
            source="GCS node table",
        )
    )
    head = next((n for n in nodes if n.get("head")), None)
    host = _host_port(reading.address).rpartition(":")[0].strip("[]")
    if head is not None and host in LOOPBACK and head["address"] not in LOOPBACK:
        findings.append(
            Finding(
                status="warn",
                message=f"the head was addressed as {host} but Ray registered it as {head['address']} "
                "(Ray replaces loopback with the machine's address unless "
                "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0): it listens on every interface, and a client "
                f"that cannot reach {head['address']} hangs in ray.init()",
                remedy=LOOPBACK_FIX,
            )
        )
    findings += _versions(ctx, reading, gcs.get("metadata") or {}, nodes, evidence)
    findings += _gpus(ctx, nodes, evidence)
    return findings


def _versions(
    ctx: Context, reading: RayReading, meta: dict[str, Any], nodes: list[Any], evidence: list[Evidence]
) -> list[Finding]:
    """The head's Python and Ray against this env's and every local raylet's workers."""
    cluster_py, cluster_ray = meta.get("python_version"), meta.get("ray_version")
    evidence.append(
        Evidence(
            name="cluster", value=f"Python {cluster_py}, Ray {cluster_ray}", source="GCS cluster metadata"
        )
    )
    findings = []
    level = ctx.env.get("RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL", "patch")
    target, _ = ctx.target
    if target is not None and cluster_py:
        same = (
            target.version == cluster_py
            if level == "patch"
            else minor_of(target.version) == minor_of(str(cluster_py))
        )
        if not same:
            findings.append(
                Finding(
                    status="fail",
                    message=f"this env runs Python {target.version}, the cluster {cluster_py}: "
                    "ray.init() from it fails with 'Version mismatch'",
                    remedy=f"run the job from an env with Python {cluster_py} (`verl-setup install "
                    f"--python {cluster_py}`), or restart every node from this env",
                )
            )
        ray_here = target.dists.get("ray")
        if ray_here and cluster_ray and ray_here != cluster_ray:
            findings.append(
                Finding(
                    status="fail",
                    message=f"this env has Ray {ray_here}, the cluster runs Ray {cluster_ray}",
                    remedy=f"install ray=={cluster_ray} here, or restart the cluster with Ray {ray_here}",
                )
            )
    for worker in reading.workers:
        evidence.append(
            Evidence(
                name=f"workers on {worker.node}", value=f"{worker.python} ({worker.version})", source="raylet"
            )
        )
        if cluster_py and worker.version and worker.version != cluster_py:
            findings.append(
                Finding(
                    status="fail",
                    message=f"node {worker.node} starts workers with Python {worker.version}, "
                    f"the head runs {cluster_py}",
                    remedy="restart that node's `ray start` from the same env as the head",
                )
            )
    remote = len(nodes) - len(reading.workers)
    if remote > 0:
        evidence.append(
            Evidence(
                name="remote nodes",
                value=str(remote),
                source=f"Ray compared their Python with the head's when they joined (match level {level})",
            )
        )
    return findings


def _gpus(ctx: Context, nodes: list[Any], evidence: list[Evidence]) -> list[Finding]:
    """verl's _check_resource_available, before the job is submitted."""
    if ctx.launch is None:
        return []
    per_node, nnodes = ctx.launch_int("trainer.n_gpus_per_node", 8), ctx.launch_int("trainer.nnodes", 1)
    if per_node is None or nnodes is None:
        return []
    need = per_node * nnodes
    total = sum(int(n.get("gpus", 0)) for n in nodes)
    wide = sum(1 for n in nodes if n.get("gpus", 0) >= per_node)
    evidence.append(
        Evidence(name="GPUs", value=f"{total} in the cluster, {need} wanted", source="GCS; launch command")
    )
    if total < need:
        return [
            Finding(
                status="fail",
                message=f"Total available GPUs {total} is less than total desired GPUs {need} "
                f"(trainer.nnodes={nnodes} x trainer.n_gpus_per_node={per_node})",
                remedy="start more GPU nodes, or lower trainer.nnodes / trainer.n_gpus_per_node",
            )
        ]
    if wide < nnodes:
        return [
            Finding(
                status="fail",
                message=f"only {wide} node(s) have {per_node} GPUs, the launch wants {nnodes}",
                remedy="match trainer.n_gpus_per_node to the GPUs each node has",
            )
        ]
    return []


def _dashboard(reading: RayReading, child: dict[str, Any], evidence: list[Evidence]) -> list[Finding]:
    dash = child.get("dashboard")
    if not dash:
        if child.get("gcs") and not child["gcs"].get("webui_url"):
            evidence.append(Evidence(name="dashboard", value="not running", source="GCS (no webui:url)"))
        return []
    evidence.append(
        Evidence(
            name="dashboard",
            value=f"{dash['url']} " + ("answers" if dash.get("ok") else f"no answer ({dash.get('error')})"),
            source="GET /api/version",
        )
    )
    if dash.get("ok"):
        return []
    return [
        Finding(
            status="fail" if reading.kind == "dashboard" else "warn",
            message=f"the Ray dashboard at {dash['url']} does not answer: `ray job submit` will fail",
            remedy="start the head with --dashboard-host=<an address clients reach> (0.0.0.0 for all)",
        )
    ]


def _host_port(address: str) -> str:
    return address.split("://", 1)[-1].rstrip("/")

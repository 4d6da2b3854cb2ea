"""Check `collective`: does a real all-reduce and all-gather pass across the Ray cluster's nodes?

One worker per GPU with NCCL (NCCL_DEBUG=INFO captured and classified), or one per node with gloo
where there are no GPUs. It runs in the target env's Python, through Ray, as verl's workers do,
so a variable that the shell has and the workers lack is seen.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from verl_setup.doctor.checks.collective.sized import bucket, judge_sized, timeout_s
from verl_setup.doctor.checks.launch.data_and_model import paths
from verl_setup.doctor.checks.launch.reader import MODEL as MODEL_KEY
from verl_setup.doctor.context import Context
from verl_setup.doctor.probes import nccl_log
from verl_setup.doctor.probes.launch_command import hydra_value
from verl_setup.doctor.probes.network import route_interface
from verl_setup.doctor.probes.ray_probe import find_address
from verl_setup.doctor.probes.reach import unreachable
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold, skip
from verl_setup.scripts import script_path
from verl_setup.util.runner import ProgramError, run

ID = "collective"
GROUP_TIMEOUT = 45.0  # torch.distributed's own timeout in each worker
HARD_TIMEOUT = GROUP_TIMEOUT + 60.0  # Ray start, actor start, torch import, then the group
SIZED_CAP = 900.0  # seconds the sized all-gather may add: past it the verdict is "times out" anyway
_PORT_IN_USE = ("EADDRINUSE", "address already in use", "Address already in use")


def check_collective(ctx: Context) -> CheckResult:
    """Run the collective in the target env and judge what every rank reported."""
    if ID not in ctx.options.checks:
        return skip(ID, "runs only when asked: `doctor --check collective` starts a worker per GPU (10-60 s)")
    target, why = ctx.target
    if target is None:
        return skip(ID, why)
    missing = [d for d in ("ray", "torch") if d not in target.dists]
    # Nothing listening at the address is the cause, found in seconds, whatever else is missing.
    blocked = _head_down(ctx) or (
        skip(
            ID, f"{' and '.join(missing)} not installed in {target.prefix}: nothing to run a collective with"
        )
        if missing
        else None
    )
    if blocked is not None:
        return blocked
    found = find_address(ctx.options.ray_address, ctx.env)
    address = found[0] if found else None
    evidence = [
        Evidence(
            name="cluster", value=address or "a private local Ray", source=found[1] if found else "no address"
        ),
        Evidence(name="python", value=target.python, source=target.source),
    ]
    numel = bucket(ctx, evidence)
    limit = timeout_s(ctx, evidence) if numel else 0.0
    with tempfile.TemporaryDirectory(prefix="vsc", dir="/tmp") as temp:  # Ray socket paths < 108
        args = {"address": address, "timeout": GROUP_TIMEOUT, "temp_dir": temp, "paths": launch_paths(ctx),
                "numel": numel, "sized_timeout": limit}  # fmt: skip
        try:
            out = run(
                [target.python, str(_child()), json.dumps(args)],
                timeout=HARD_TIMEOUT + min(limit, SIZED_CAP),
                env=ctx.env,
                cwd=temp,
            )
        except ProgramError as exc:
            return fold(ID, [Finding(status="fail", message=f"the collective did not finish: {exc}",
                                     remedy="run it by hand with NCCL_DEBUG=INFO and look where it stops")],
                        evidence, ok="")  # fmt: skip
    try:
        report: dict[str, Any] = json.loads(out.stdout)
    except json.JSONDecodeError:
        tail = (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
        return fold(
            ID, [Finding(status="fail", message=f"the collective probe crashed: {tail}")], evidence, ok=""
        )
    return with_sized(judge(ctx, report, evidence), report, numel, limit)


def _head_down(ctx: Context) -> CheckResult | None:
    """A failure in seconds when nothing listens at the Ray address, before the minute-long probe."""
    found = find_address(ctx.options.ray_address, ctx.env)
    why = unreachable(found[0]) if found else None
    if found is None or why is None:
        return None
    evidence = [Evidence(name="cluster", value=found[0], source=found[1])]
    return fold(ID, [Finding(status="fail", message=f"no Ray head at {found[0]}: {why}",
                             remedy="start the head there (`ray start --head --port PORT`), or give the "
                             "address `ray status` prints on the head (--ray-address HOST:PORT)")],
                evidence, ok="")  # fmt: skip


def with_sized(result: CheckResult, report: dict[str, Any], numel: int | None, limit: float) -> CheckResult:
    """The small collective's result plus the sized all-gather's verdict, when one ran."""
    if not numel or not report.get("results"):
        return result
    sized = judge_sized(report["results"], numel, limit)
    return fold(ID, [*result.findings, *sized], result.evidence, ok="collective passes")


def judge(ctx: Context, report: dict[str, Any], evidence: list[Evidence]) -> CheckResult:
    """Findings from the child's report (separate so the rules read without a cluster)."""
    if report.get("init_error"):  # Ray did not start, or did not join the cluster
        message = f"the collective probe crashed: {report['init_error']}"
        return fold(ID, [Finding(status="fail", message=message)], evidence, ok="")
    if "backend" not in report and report.get("error"):
        return skip(ID, f"cannot run the collective: {report['error']}")
    world = int(report.get("world", 0))
    evidence.append(
        Evidence(
            name="group",
            value=f"{report.get('backend')} over {world} worker(s) on {report.get('nodes')} node(s), "
            f"rendezvous {report.get('master', '-')}",
            source="Ray nodes; one worker per GPU (per node without GPUs)",
        )
    )
    findings: list[Finding] = []
    if report.get("error"):
        findings.append(
            Finding(
                status="fail",
                message=f"the collective's workers did not all answer: {report['error']}",
                remedy="check `ray status` (every node alive, a free GPU per worker) and rerun",
            )
        )
    results = report.get("results") or []
    members = report.get("members") or []
    master_host = str(report.get("master", "")).rpartition(":")[0]
    failed = [r for r in results if not r.get("ok")]
    for r in results:
        evidence.append(
            Evidence(
                name=f"rank {r['rank']}",
                value=("ok" if r.get("ok") else r.get("error", "failed")) + f" in {r.get('seconds')}s",
                source=_where(members, r["rank"]),
            )
        )
    if results and not failed:
        want_sum = float(world * (world + 1) // 2)
        sums = {r.get("all_reduce") for r in results}
        gathers = {tuple(r.get("all_gather") or ()) for r in results}
        if sums == {want_sum} and gathers == {tuple(float(i) for i in range(world))}:
            findings.append(
                Finding(
                    status="pass",
                    message=f"all-reduce and all-gather over {world} worker(s) agree on every rank",
                )
            )
        else:
            findings.append(
                Finding(status="fail", message=f"wrong results: all-reduce {sums}, all-gather {gathers}")
            )
    for r in failed:
        findings += _failure(r, master_host, report.get("master", ""))
    findings += _unseen_paths(members)
    for m in members[:1] + [m for m in members[1:] if m["env"] != members[0]["env"]]:
        for d in nccl_log.missing_variables(ctx.env, m["env"], where=f"the Ray workers on {m['node_ip']}"):
            findings.append(Finding(status="warn", message=d.line, remedy=d.remedy))
    return fold(ID, findings, evidence, ok="collective passes")


def launch_paths(ctx: Context) -> list[str]:
    """The local files and folders the launch names (model, data), for every worker to look for."""
    if ctx.launch is None:
        return []
    found = []
    for key in (MODEL_KEY, "data.train_files", "data.val_files"):
        given = ctx.launch.override(key)
        for value in paths(hydra_value(given.value)) if given and given.value else []:
            if value.startswith(("/", "~")):
                found.append(str(Path(value).expanduser()))
    return found


def _unseen_paths(members: list[dict[str, Any]]) -> list[Finding]:
    """A path the launch names that some node's workers cannot see (no shared filesystem there)."""
    findings = []
    for path in sorted({p for m in members for p in m.get("paths", {})}):
        blind = sorted({m["node_ip"] + f" (node {str(m.get('node', '?'))[:8]})" for m in members
                        if not m.get("paths", {}).get(path)})  # fmt: skip
        if blind:
            findings.append(
                Finding(
                    status="fail",
                    message=f"{path} does not exist for the Ray workers on {', '.join(blind)}",
                    remedy="put the model and data on a filesystem every node mounts at the same path, "
                    "or copy them to each node (a Hub id in model.path downloads on every node)",
                )
            )
    return findings


def _where(members: list[dict[str, Any]], rank: int) -> str:
    if rank >= len(members):
        return "worker"
    m = members[rank]
    return f"worker on {m['node_ip']} (node {str(m.get('node', '?'))[:8]})"


def _failure(result: dict[str, Any], master_host: str, master: str) -> list[Finding]:
    error = str(result.get("error", ""))
    log = str(result.get("nccl_log", ""))
    iface = route_interface(master_host) if master_host else None
    hint = f"; the route to {master_host} goes through {iface}: NCCL_SOCKET_IFNAME={iface}" if iface else ""
    found = []
    if any(s in error for s in _PORT_IN_USE):
        found.append(
            Finding(
                status="fail",
                message=f"rank {result['rank']}: the rendezvous port {master} is taken: {error}",
                remedy="pick a free MASTER_PORT (or unset it) and open the port range between nodes",
            )
        )
    diagnoses = nccl_log.classify(log + "\n" + error)
    for d in diagnoses:
        found.append(
            Finding(
                status="fail", message=f"rank {result['rank']}: {d.cause}: {d.line}", remedy=d.remedy + hint
            )
        )
    if not found:
        found.append(
            Finding(
                status="fail",
                message=f"rank {result['rank']} failed: {error}",
                remedy="rerun with NCCL_DEBUG=INFO on every node" + hint,
            )
        )
    return found


def _child() -> Path:
    return script_path("collective")

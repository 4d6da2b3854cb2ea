"""Cluster classes: NCCL timeouts and connect failures, dead Ray workers, resource waits."""

from __future__ import annotations

import re
from collections.abc import Sequence

from verl_setup.diagnose.finding import LogEvidence, LogFinding, evidence_of, near
from verl_setup.diagnose.scan import Hit
from verl_setup.diagnose.silent_ranks import never_reported
from verl_setup.diagnose.workers import last_traceback
from verl_setup.doctor.probes.nccl_log import address_kind
from verl_setup.host.resources import cgroup_limit

_WATCHDOG = re.compile(
    r"\[Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), "
    r"OpType=(?P<op>\w+), NumelIn=(?P<numel_in>\d+), NumelOut=(?P<numel_out>\d+), "
    r"Timeout\(ms\)=(?P<timeout_ms>\d+)\)"
)
# torch's own prefix names the global rank (`[rank15]:[E218 ...]`); the `[Rank 1]` or
# `[PG ID 11 ... Rank 1]` after it is that process's rank in the process group that timed out.
_GLOBAL = re.compile(r"\[rank(\d+)\]:")
_GROUP = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]")
_REPORT = re.compile(
    r"Watchdog caught collective operation timeout"
    r"|Exception \(either an error or timeout\) detected by watchdog|Timeout at NCCL work"
)
_NEVER_COMPLETED = re.compile(r"last completed NCCL work: -1\b")


def _rank(line: str) -> int | None:
    """The global rank a torch line speaks for: its `[rankN]:` prefix, else its `[Rank N]`."""
    m = _GLOBAL.search(line) or _GROUP.search(line)
    return int(m[1]) if m else None


def nccl_timeout(hits: Sequence[Hit], *, as_verdict: bool, launch: Sequence[Hit] = ()) -> LogFinding:
    """An NCCL watchdog timeout: OpType, Numel, which ranks reported it and which did not."""
    facts: dict[str, str] = {}
    reported: set[int] = set()
    seen: set[int] = set()
    never = False
    for hit in hits:
        if m := _WATCHDOG.search(hit.text):
            facts = facts or {k: v for k, v in m.groupdict().items() if k != "rank"}
        for line in (*hit.before, hit.text, *hit.after):
            rank = _rank(line)
            if rank is None:
                continue
            seen.add(rank)
            if _REPORT.search(line):
                reported.add(rank)
            never = never or bool(_NEVER_COMPLETED.search(line))
    silent = sorted(seen - reported)
    facts["ranks_reporting"] = ",".join(map(str, sorted(reported)))
    if silent:
        facts["ranks_silent"] = ",".join(map(str, silent))
    # The group's first collective (SeqNum=1, nothing completed before it) never finished: the ranks
    # never connected, and no timeout is long enough for that.
    first = facts.get("seq") == "1" or never
    if first:
        facts["first_collective"] = "never completed"
    gb = int(facts.get("numel_out", 0)) * 2 / 1e9
    op = (
        f"{facts['op']} (NumelOut={facts['numel_out']}, {gb:.2f} GB in bf16), SeqNum={facts['seq']}, "
        if "op" in facts
        else ""
    )
    summary = (
        f"an NCCL collective timed out: {op}after {int(facts.get('timeout_ms', 0)) // 1000 or '?'} s; "
        f"rank(s) {facts['ranks_reporting'] or '?'} reported it"
        + (
            f", rank(s) {facts['ranks_silent']} in the same lines did not (the one that did not "
            "answer is among them)"
            if silent
            else ""
        )
    )
    if first:
        summary = (
            f"the process group's first NCCL collective never completed ({op}nothing completed before "
            "it): the ranks never connected, a network or GPU peer-to-peer problem, not a slow step"
        )
        remedy: tuple[str, ...] = (
            "run `verl-setup doctor --check collective -- <launch>` on every node: it runs a real "
            "all-reduce and shows the interface NCCL picks and where it stops",
            "several nodes: export NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) naming the interface "
            "that routes between them, before `ray start`, and open the ports between the nodes",
            "one node that hangs inside it: GPU peer-to-peer is blocked (PCIe ACS, a VM or container); "
            "try NCCL_P2P_DISABLE=1, and read NCCL_DEBUG=INFO's transport lines",
        )
        return LogFinding(
            cls="nccl-timeout", tier=1, summary=summary, evidence=evidence_of(hits), remedy=remedy,
            facts=facts,
        )  # fmt: skip
    absent = never_reported(seen, launch)  # the launch's ranks no line names (another node)
    if absent is not None:
        summary += absent[0]
        facts["ranks_never_reported"] = absent[0].split(" ")[2]
    remedy = (
        *((absent[1],) if absent else ()),
        *(("no rank's own failure (an OOM, a traceback) was found in what was read: add that rank's "
           "worker log if you have it",) if as_verdict else ()),
        "time the link before launch with `verl-setup doctor --check collective --bucket-numel "
        f"{facts.get('numel_out', 'N')} -- <launch>` (it all-gathers that many elements against the "
        "timeout): a broken link fails it, a slow one shows its time",
        "if the link is healthy but slow for a buffer this size, raise actor_rollout_ref.nccl_timeout "
        "(seconds; verl 0.9 defaults to 600)",
    )  # fmt: skip
    return LogFinding(
        cls="nccl-timeout", tier=1, summary=summary, evidence=evidence_of(hits), remedy=remedy, facts=facts
    )


_CONNECT = re.compile(r"Connect to (?P<addr>\S+?)<(?P<port>\d+)> failed(?: : (?P<why>.*))?")
# socketPollConnect (NCCL 2.19+): "connect to 172.16.30.229:39953" or "connect to ADDR<PORT> returned"
_POLL = re.compile(r"connect to (?P<addr>[\w.:%-]+?)(?::(?P<port>\d+)\b|<(?P<port2>\d+)>)")


def nccl_connect(hits: Sequence[Hit]) -> LogFinding:
    """`socketStartConnect: Connect to <addr> failed`, by the address's class."""
    addr, port = "?", "?"
    for hit in hits:
        if m := _CONNECT.search(hit.text):
            addr, port = m["addr"], m["port"]
            break
        if p := _POLL.search(hit.text):
            addr, port = p["addr"], p["port"] or p["port2"]
            break
    kind = address_kind(addr) or "routable"
    facts = {"address": addr, "port": port, "address_class": kind}
    if kind == "routable":
        remedy: tuple[str, ...] = (
            f"{addr} is routable but refused or dropped NCCL's connection to port {port}: open the ports "
            "between the nodes (firewall, security group: NCCL picks random ports), or read the peer's own "
            "log, it may have died first",
        )
    else:
        remedy = (
            f"{addr} is a {kind} address that another node cannot reach: export NCCL_SOCKET_IFNAME (and "
            "GLOO_SOCKET_IFNAME) naming the interface that routes between the nodes, on every node before "
            "`ray start` (Ray workers inherit its environment)",
            "`verl-setup doctor --check collective` shows which interface NCCL picks on each node",
        )
    return LogFinding(
        cls="nccl-connect", tier=0, summary=f"NCCL could not connect to {addr} port {port} ({kind})",
        evidence=evidence_of(hits), remedy=remedy, facts=facts,
    )  # fmt: skip


# The dead actor's own pid: the `pid: N` line of Ray's actor block, or the raylet's `Worker PID: N`;
# never a `(pid=N, ip=...)` of the task that caught the error (ray::main_task, a driver).
_PID = re.compile(r"^\s*pid: (\d+)|Worker PID: (\d+)")
_K8S = "may have exceeded K8s pod memory limits"
_NAME = re.compile(r"\bname: (\S+)|class_name: (\S+)")
_WORKER_ID = re.compile(r"(?:Worker ID: |on worker |worker_id=)([0-9a-f]{56})")
_EXIT = re.compile(r"Worker exit type: (\w+) Worker exit detail: ([^.]*)")


def worker_died(hits: Sequence[Hit], session_logs: Sequence[str], *, as_verdict: bool) -> LogFinding:
    """A Ray worker died: its pid, its exit, and its own last traceback from its .err."""
    facts: dict[str, str] = {}
    for hit in hits:
        text = near(hit)
        for line in (hit.text, *hit.after):
            if "pid" not in facts and (p := _PID.search(line)):
                facts["pid"] = p[1] or p[2]
        if _K8S in text:
            facts["k8s_memory_hint"] = "yes"
        if "actor" not in facts and (n := _NAME.search(text)):
            facts["actor"] = n[1] or n[2]
        if "worker_id" not in facts and (w := _WORKER_ID.search(text)):
            facts["worker_id"] = w[1]
        if "exit" not in facts and (e := _EXIT.search(text)):
            facts.update(exit=e[1], exit_detail=e[2].strip())
    evidence = list(evidence_of(hits, 2))
    remedy: list[str] = []
    if "k8s_memory_hint" in facts:
        remedy.append(_pod_limit_remedy())
    found = last_traceback(session_logs, facts.get("pid"), facts.get("worker_id"))
    if found is not None:
        evidence.append(LogEvidence(path=found.path, line=found.line, text=found.text))
        facts["last_error"] = found.text
        remedy.append(f"the worker's own last error is {found.text!r} ({found.path}:{found.line}): fix that")
    elif as_verdict:
        remedy.append(
            "no traceback of the worker was found"
            + (f" (no .err for pid {facts['pid']} in what was read)" if "pid" in facts else "")
            + ": a worker that dies without one was killed from outside (SIGKILL by the kernel's OOM killer, "
            "`ray stop --force`) or crashed (SIGSEGV); run diagnose where the kernel log (dmesg) and the "
            "cgroup's memory.events are readable, and pass Ray's session folder (/tmp/ray/session_latest)"
        )
    worker = f"Ray worker {facts['worker_id'][:12]}" if "worker_id" in facts else "a Ray worker"
    who = facts.get("actor", worker) + (f" (pid {facts['pid']})" if "pid" in facts else "")
    exit_ = f": {facts['exit']}, {facts['exit_detail']}" if "exit" in facts else ""
    if "k8s_memory_hint" in facts:
        exit_ += "; Ray says it may have exceeded the Kubernetes pod's memory limit"
    return LogFinding(
        cls="worker-died", tier=1, summary=f"{who} died{exit_}", evidence=tuple(evidence),
        remedy=tuple(remedy), facts=facts,
    )  # fmt: skip


def _pod_limit_remedy() -> str:
    limit, where = cgroup_limit()
    here = (
        f"the cgroup limit where diagnose runs is {limit / 2**30:.1f} GiB ({where})"
        if limit is not None
        else "no cgroup memory limit is set where diagnose runs (run it inside the pod to read it)"
    )
    return (
        "Ray's own hint: the worker exited without a traceback and may have exceeded the pod's memory "
        f"limit (resources.limits.memory); {here}. Raise the limit, or lower what each worker holds on "
        "the host (param/optimizer offload, data.dataloader_num_workers); `verl-setup doctor --check "
        "memory -- <launch>` compares a launch with that limit"
    )


_GPUS = re.compile(r"Total available GPUs (?P<have>[\d.]+) is less than total desired GPUs (?P<want>\d+)")
_DEMAND = re.compile(r"cannot be scheduled right now: (?P<demand>\{[^}]*\})")
_SPECS = re.compile(
    r"Waiting for creating a placement group of specs for (?P<waited>\d+) seconds\. "
    r"specs=(?P<specs>\[[^\]]*\])"
)
_RAYLET_GPUS = re.compile(
    r"Attempting to start raylet with (?P<want>\d+) GPU, "
    r"but CUDA_VISIBLE_DEVICES contains (?P<visible>\[[^\]]*\])"
)


def resource_wait(hits: Sequence[Hit]) -> LogFinding:
    """A placement group or resource request that the cluster cannot satisfy."""
    facts: dict[str, str] = {}
    for hit in hits:
        for pattern in (_GPUS, _DEMAND, _RAYLET_GPUS, _SPECS):
            if m := pattern.search(hit.text):
                facts.update(m.groupdict())
    if "have" in facts:
        summary = (
            f"verl wants {facts['want']} GPUs and the Ray cluster offers {facts['have']}: "
            "it stops before training"
        )
    elif "visible" in facts:
        summary = (
            f"Ray was asked for {facts['want']} GPUs while CUDA_VISIBLE_DEVICES shows {facts['visible']}"
        )
    elif "specs" in facts:
        summary = (
            f"vLLM waited {facts['waited']} s for a Ray placement group {facts['specs']} that the cluster "
            "cannot place (not enough GPUs, or a node whose IP differs from VLLM_HOST_IP)"
        )
    elif "demand" in facts:
        summary = (
            f"Ray cannot schedule {facts['demand']}: the request waits for resources the cluster "
            "does not have"
        )
    elif any("exceeds the total number of available GPUs" in h.text for h in hits):
        summary = (
            "vLLM needs more GPUs (tensor x pipeline parallel) than the Ray cluster it joined offers: "
            "`ray status` lists what each node registered"
        )
    else:
        summary = "a Ray placement group never became ready: the cluster lacks the resources it asks for"
    remedy = (
        "verl asks for trainer.nnodes x trainer.n_gpus_per_node GPUs (one bundle per GPU, with CPUs): "
        "make them "
        "match what `ray status` shows (CUDA_VISIBLE_DEVICES limits what a node offers), or join more nodes",
        "a CPU shortfall per bundle: pass ray_kwargs.ray_init.num_cpus, or start Ray with --num-cpus",
        "`verl-setup doctor --check ray -- <launch>` compares the request with the cluster before launch",
    )
    return LogFinding(
        cls="resource-wait", tier=0, summary=summary, evidence=evidence_of(hits), remedy=remedy, facts=facts
    )

"""verify --ray: probe every alive node of a running Ray cluster; compare with the head and a lock.

Ray refuses workers whose Python patch differs from the head's, and a torch that differs between
nodes shows up only mid-training. The driver runs in a child process of the environment's own
interpreter (it needs that env's ray) under a hard timeout: a client that cannot reach the head
hangs in ray.init and ignores SIGTERM, so it is SIGKILLed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from verl_setup.cluster.ray_tasks import loopback_env, run_on_every_node
from verl_setup.environment.lock import Lock, read_lock
from verl_setup.environment.verify import PROBE_PARTS, Expected, Mismatch, Snapshot, compare, from_lock
from verl_setup.errors import CheckFailedError
from verl_setup.output import envelope

__all__ = ["Node", "compare_nodes", "loopback_env", "probe_cluster", "verify_cluster"]


@dataclass(frozen=True, kw_only=True)
class Node:
    """One alive node: its id, address, whether it is the head, and what its worker saw."""

    node_id: str
    ip: str
    head: bool
    snapshot: Snapshot | None
    error: str | None

    @property
    def label(self) -> str:
        """How the report names the node."""
        return f"{'head' if self.head else 'node'} {self.node_id[:8]} at {self.ip}"


def probe_cluster(
    python: Path,
    address: str,
    *,
    timeout: float,
    env: Mapping[str, str],
    runtime_env: Mapping[str, Any] | None = None,
    only: Sequence[str] = (),
) -> list[Node]:
    """One probe task pinned to each alive node; never waits longer than `timeout` seconds.

    With a runtime env that sets py_executable, the workers (so the probe) run that interpreter."""
    answers = run_on_every_node(
        python,
        address,
        ("interpreter", "_interrogate"),
        args=(list(PROBE_PARTS), "*"),
        timeout=timeout,
        env=env,
        what="verify",
        runtime_env=runtime_env,
        only=only,
    )
    return [
        Node(
            node_id=n["node_id"],
            ip=n["ip"],
            head=n["head"],
            snapshot=Snapshot.from_json(n["probe"]) if "probe" in n else None,
            error=n.get("error"),
        )
        for n in answers.nodes
    ]


def compare_nodes(nodes: list[Node], lock: Lock | None) -> list[tuple[Node, list[Mismatch], list[str]]]:
    """Each node against the head (exact Python, platform, every distribution) and the lock."""
    head = next((n.snapshot for n in nodes if n.head and n.snapshot), None)
    results = []
    for node in nodes:
        findings: list[Mismatch] = []
        notes: list[str] = []
        snap = node.snapshot
        if snap is None:
            findings.append(Mismatch(kind="unreachable", name=node.node_id[:8], note=node.error or ""))
        elif head is not None:
            for what, mine, theirs in (
                ("python", snap.python, head.python),
                ("platform", snap.platform, head.platform),
            ):
                if mine != theirs:
                    findings.append(Mismatch(kind="python", name=what, expected=theirs, found=mine))
            own, more = compare(snap, Expected(source="the head", pins=head.versions(), complete=True))
            findings += own
            notes += more
        if snap is not None and lock is not None:
            own, more = compare(snap, from_lock(lock, snap.markers))
            findings += [f for f in own if f not in findings]
            notes += more
        results.append((node, findings, notes))
    return results


def verify_cluster(
    python: Path,
    address: str,
    *,
    lock_file: Path | None,
    timeout: float,
    env: Mapping[str, str],
    out: TextIO,
    as_json: bool,
    runtime_env: Mapping[str, Any] | None = None,
    only: Sequence[str] = (),
) -> int:
    """`verify --ray ADDRESS`: report every node against `lock_file` (read first) or each node's
    manifest; exit 5 if any differs or does not answer."""
    lock = read_lock(lock_file) if lock_file else None
    nodes = probe_cluster(python, address, timeout=timeout, env=env, runtime_env=runtime_env, only=only)
    results = compare_nodes(nodes, lock)
    bad = [(node, findings) for node, findings, _ in results if findings]
    if not as_json:
        out.write(_text(address, results, lock))
    elif not bad:
        out.write(envelope("verify", _json(address, results, lock)))
    if bad:
        parts = [
            f"{node.label}: "
            + ", ".join(f"{f.kind} {f.name}" for f in findings[:3])
            + (", ..." if len(findings) > 3 else "")
            for node, findings in bad
        ]
        raise CheckFailedError(
            f"Ray cluster at {address}: {len(bad)} of {len(nodes)} nodes differ: " + "; ".join(parts),
            data=_json(address, results, lock) if as_json else None,
        )
    return 0


def _text(address: str, results: list[tuple[Node, list[Mismatch], list[str]]], lock: Lock | None) -> str:
    against = "the head" + (f" and lock {lock.path.name}" if lock else "")
    lines = [f"Ray cluster at {address}: {len(results)} alive nodes, each compared with {against}"]
    for node, _, _ in results:
        s = node.snapshot
        if s is None:
            lines.append(f"  {node.label}: {node.error}")
        else:
            count = len(s.versions())
            lines.append(
                f"  {node.label}: Python {s.python}, {s.platform}, {count} distributions, {s.prefix}"
            )
    for node, findings, notes in results:
        if findings or notes:
            lines.append(f"{node.label}:")
            lines += [f.line() for f in findings] + [f"  note       {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _json(
    address: str, results: list[tuple[Node, list[Mismatch], list[str]]], lock: Lock | None
) -> dict[str, Any]:
    return {
        "address": address,
        "lock": str(lock.path) if lock else None,
        "ok": not any(findings for _, findings, _ in results),
        "nodes": [
            {
                "node_id": node.node_id,
                "ip": node.ip,
                "head": node.head,
                "python": node.snapshot.python if node.snapshot else None,
                "platform": node.snapshot.platform if node.snapshot else None,
                "prefix": node.snapshot.prefix if node.snapshot else None,
                "error": node.error,
                "findings": [f.to_json() for f in findings],
                "notes": notes,
            }
            for node, findings, notes in results
        ],
    }

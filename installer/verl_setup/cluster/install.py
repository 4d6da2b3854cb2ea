"""install --cluster: the cluster plan's row installed once on a shared prefix, or on every node.

Whether the prefix is shared is decided by evidence, not by name: a marker written beside it on
one node must be readable on every other (the filesystem type each node reports, NFS, Lustre,
GPFS, BeeGFS or CephFS, is shown with it). Each node runs the ordinary `verl-setup install` (atomic:
staging folder, verify, one rename) in a Ray task pinned to it, so a node that fails or dies keeps
its old environment and the others keep their result. Then `verify --prefix` runs on every
installed node, in a Ray task pinned to it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from verl_setup.cluster.ray_tasks import run_on_every_node
from verl_setup.scripts import Script

Reach = Literal["py_modules", "installed"]
NETWORK_FILESYSTEMS = ("nfs", "nfs4", "lustre", "gpfs", "beegfs", "ceph", "fuse.ceph", "fuse.ceph-fuse")


@dataclass(frozen=True, kw_only=True)
class Sharing:
    """Whether every node sees the same folder, with each node's filesystem type as evidence."""

    shared: bool
    writer: str  # the node that wrote the marker
    fstypes: dict[str, str]  # node id -> filesystem type of the folder
    unseen: tuple[str, ...]  # nodes that could not read the marker

    def words(self) -> str:
        """One line for the progress display."""
        kinds = ", ".join(sorted(set(self.fstypes.values())))
        network = any(k in NETWORK_FILESYSTEMS for k in self.fstypes.values())
        if self.shared:
            return f"shared by every node (marker written on {self.writer[:8]} read on all; {kinds})"
        more = "; a network filesystem that is not the same mount everywhere" if network else ""
        return f"node-local ({len(self.unseen)} node(s) did not see the marker; {kinds}{more})"

    def to_json(self) -> dict[str, Any]:
        """For --json."""
        return {
            "shared": self.shared,
            "writer": self.writer,
            "fstypes": self.fstypes,
            "unseen": list(self.unseen),
        }


@dataclass(frozen=True, kw_only=True)
class NodeResult:
    """One node's install: ok, or the one line that says why not."""

    node_id: str
    ip: str
    hostname: str | None
    ok: bool
    error: str | None
    seconds: float | None

    @property
    def label(self) -> str:
        """How the report names the node."""
        return f"{self.hostname or self.ip} ({self.node_id[:8]}, {self.ip})"

    def to_json(self) -> dict[str, Any]:
        """For --json."""
        return {
            "node_id": self.node_id,
            "ip": self.ip,
            "hostname": self.hostname,
            "ok": self.ok,
            "error": self.error,
            "seconds": self.seconds,
        }


def check_sharing(
    python: Path, address: str, folder: Path, *, env: Mapping[str, str], timeout: float
) -> Sharing:
    """Write a marker in `folder` on the head node, read it on every node, remove it."""
    marker = f".verl-setup-shared-{uuid.uuid4().hex}"
    common: dict[str, Any] = {"env": env, "timeout": timeout, "what": "check the filesystem of"}
    fs: tuple[Script, str] = ("ray_task_install", "_fs")
    wrote = run_on_every_node(
        python,
        address,
        ("ray_task_install", "_fs"),
        args=("write", str(folder), marker),
        only=("head",),
        **common,
    )
    writer = next((n["node_id"] for n in wrote.nodes if "probe" in n), "")
    read = run_on_every_node(python, address, fs, args=("read", str(folder), marker), **common)
    if writer:
        run_on_every_node(
            python,
            address,
            ("ray_task_install", "_fs"),
            args=("remove", str(folder), marker),
            only=(writer,),
            **common,
        )
    answered = [n for n in read.nodes if "probe" in n]
    unseen = tuple(n["node_id"] for n in read.nodes if not n.get("probe", {}).get("seen"))
    return Sharing(
        shared=bool(writer) and not unseen,
        writer=writer,
        fstypes={n["node_id"]: n["probe"]["fstype"] for n in answered},
        unseen=unseen,
    )


def install_on_nodes(
    python: Path,
    address: str,
    argv: Sequence[str],
    *,
    only: Sequence[str],
    env: Mapping[str, str],
    timeout: float,
    reach: Reach,
    runtime_env: Mapping[str, Any] | None,
    live: bool = True,
) -> list[NodeResult]:
    """`verl-setup install ARGV` pinned to each node in `only` (all alive nodes when empty), in parallel;
    `live`: each node's "finished" line as it comes (not under -q)."""
    answers = run_on_every_node(
        python,
        address,
        ("ray_task_install", "_install"),
        env=env,
        timeout=timeout + 60,
        task_timeout=timeout,
        what="install on",
        runtime_env=runtime_env,
        args=(reach, list(argv)),
        only=only,
        live=live,
    )
    results = []
    for n in answers.nodes:
        probe = n.get("probe")
        if probe is None:
            error = n.get("error") or "no answer"
        elif probe["returncode"] != 0:
            error = f"exit {probe['returncode']}: {probe['error'] or 'no message'}"
        else:
            error = None
        results.append(
            NodeResult(
                node_id=n["node_id"],
                ip=n["ip"],
                hostname=probe["hostname"] if probe else None,
                ok=error is None,
                error=error,
                seconds=probe["seconds"] if probe else None,
            )
        )
    return results

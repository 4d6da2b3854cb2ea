"""The cluster file: every node's `detect --json`, keyed by node, with when and how it was gathered.

`detect --ray` and `detect --slurm` write it, `plan --cluster`, `install --cluster` and `render
--cluster` read it. A node that did not answer is kept under `missing` with the reason, never
dropped. Read bounded, like a host file: a regular file, a size cap, a nesting limit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from verl_setup.errors import BadInputError
from verl_setup.host.facts import HostFacts, host_from_data, read_json_file
from verl_setup.util.bounded import one_line

KIND = "verl-setup-cluster"
SCHEMA = 1
MAX_CLUSTER_FILE = 256 * 2**20  # a node's facts are a few KB; thousands of nodes fit
MAX_NODES = 100_000


@dataclass(frozen=True, kw_only=True)
class ClusterNode:
    """One node that answered: its key (Ray node id or Slurm node name), address and facts."""

    name: str
    ip: str | None
    hostname: str | None
    head: bool
    host: HostFacts
    # The interface the node's kernel routes to the head through (doctor collective's
    # NCCL_SOCKET_IFNAME suggestion, read on the node); None where it could not be read.
    iface_to_head: str | None = None

    @property
    def label(self) -> str:
        """How reports name the node: its hostname or IP, and the key when that says more."""
        where = self.hostname or self.ip or self.name
        return where if where == self.name else f"{where} ({self.name[:8]})"


@dataclass(frozen=True, kw_only=True)
class MissingNode:
    """A node the gatherer knew of that gave no facts, and why."""

    name: str
    ip: str | None
    reason: str


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """Every node's facts, how they were gathered (`ray`, `slurm`, `files`) and the nodes missing."""

    nodes: tuple[ClusterNode, ...]
    missing: tuple[MissingNode, ...] = ()
    how: str = "files"
    address: str | None = None
    gathered_at: str = ""
    tool: str | None = None  # how the tool reached the nodes: py_modules, installed, srun
    path: Path | None = None

    def to_json(self) -> str:
        """The documented cluster file (schema 1)."""
        data = {
            "schema": SCHEMA,
            "kind": KIND,
            "gathered": {
                "how": self.how,
                "at": self.gathered_at or now(),
                "address": self.address,
                "tool": self.tool,
            },
            "nodes": {
                n.name: {
                    "ip": n.ip,
                    "hostname": n.hostname,
                    "head": n.head,
                    "iface_to_head": n.iface_to_head,
                    "host": json.loads(n.host.to_json()),
                }
                for n in self.nodes
            },
            "missing": {m.name: {"ip": m.ip, "reason": m.reason} for m in self.missing},
        }
        return json.dumps(data, indent=2) + "\n"


def now() -> str:
    """The gathering time as ISO 8601 in UTC."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def save_cluster(cluster: Cluster, path: Path) -> str:
    """Write the cluster file whole, then rename it into place (a reader never sees half of it);
    the text written (its gathering time is read once)."""
    text = cluster.to_json()
    part = path.with_name(f".{path.name}.part")
    part.write_text(text, encoding="utf-8")
    part.replace(path)
    return text


def load_cluster(path: Path) -> Cluster:
    """Read a cluster file (bounded, as a host file is); BadInputError names the file, node and key."""
    return cluster_from_data(read_json_file(path, MAX_CLUSTER_FILE, "cluster file"), str(path), path=path)


def cluster_from_data(data: object, where: str, *, path: Path | None = None) -> Cluster:
    """A parsed cluster file as a Cluster (every node's facts built as a host file's are)."""
    shown = repr(one_line(where))
    if isinstance(data, dict) and data.get("command") == "detect" and isinstance(data.get("data"), dict):
        data = data["data"]  # `detect --ray --json` as printed (the envelope); the bare file also works
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise BadInputError(
            f"cluster file {shown}: not a cluster file (make it with `verl-setup detect --ray ADDRESS` "
            "or `detect --slurm`)"
        )
    if data.get("schema") != SCHEMA:
        raise BadInputError(f"cluster file {shown}: schema {one_line(repr(data.get('schema')))} is not 1")
    gathered, nodes, missing = data.get("gathered"), data.get("nodes"), data.get("missing", {})
    if not isinstance(gathered, dict) or not isinstance(nodes, dict) or not isinstance(missing, dict):
        raise BadInputError(f"cluster file {shown}: expected objects under gathered, nodes and missing")
    if len(nodes) + len(missing) > MAX_NODES:
        raise BadInputError(f"cluster file {shown}: more than {MAX_NODES} nodes")
    built = []
    for name, entry in nodes.items():
        node_where = f"{where}#{name}"
        if not isinstance(entry, dict):
            raise BadInputError(f"cluster file {shown}: node {one_line(name)!r} is not an object")
        built.append(
            ClusterNode(
                name=name,
                ip=_text(entry.get("ip"), node_where, "ip"),
                hostname=_text(entry.get("hostname"), node_where, "hostname"),
                head=entry.get("head") is True,
                host=host_from_data(entry.get("host"), node_where),
                iface_to_head=_text(entry.get("iface_to_head"), node_where, "iface_to_head"),
            )
        )
    gone = []
    for name, entry in missing.items():
        if not isinstance(entry, dict):
            raise BadInputError(f"cluster file {shown}: missing node {one_line(name)!r} is not an object")
        gone.append(
            MissingNode(
                name=name,
                ip=_text(entry.get("ip"), f"{where}#{name}", "ip"),
                reason=_text(entry.get("reason"), f"{where}#{name}", "reason") or "no reason given",
            )
        )
    cluster = Cluster(
        nodes=tuple(built),
        missing=tuple(gone),
        how=_text(gathered.get("how"), where, "gathered.how") or "files",
        address=_text(gathered.get("address"), where, "gathered.address"),
        gathered_at=_text(gathered.get("at"), where, "gathered.at") or "",
        tool=_text(gathered.get("tool"), where, "gathered.tool"),
        path=path,
    )
    if not built:
        raise BadInputError(f"cluster file {shown}: no node answered; nothing to plan for")
    return cluster


def _text(value: object, where: str, key: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise BadInputError(
        f"cluster file {one_line(where)!r}: {key}: expected a string, got {one_line(repr(value))}"
    )

"""What differs between the nodes of a cluster without blocking a row, but breaks a Ray cluster.

Ray refuses a worker whose Python patch differs from the head's; a ray on PATH of another version
cannot join; a glibc that differs means wheels (and a shared venv) differ; CUDA_VISIBLE_DEVICES,
NCCL_*/GLOO_* and HF caches that differ make ranks hang or download twice; GPU counts that differ
cannot be one `trainer.n_gpus_per_node`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from verl_setup.host.cluster_file import Cluster, ClusterNode
from verl_setup.util.versions import minor_of

if TYPE_CHECKING:
    from verl_setup.plan.select import Plan

UNSET = "unset"
HF_VARIABLES = ("HF_HOME", "HF_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_HUB_OFFLINE")


@dataclass(frozen=True, kw_only=True)
class Difference:
    """One fact that is not the same on every node: each value with the nodes that have it."""

    what: str
    groups: tuple[tuple[str, tuple[str, ...]], ...]
    why: str

    def line(self, total: int) -> str:
        """One line: the fact, each value with its nodes (the most common first), and why it matters."""
        values = "; ".join(f"{value} on {nodes_words(nodes, total)}" for value, nodes in self.groups)
        return f"{self.what} differs: {values} ({self.why})"

    def to_json(self) -> dict[str, Any]:
        """For --json."""
        return {
            "what": self.what,
            "values": [{"value": v, "nodes": list(n)} for v, n in self.groups],
            "why": self.why,
        }


def nodes_words(nodes: Sequence[str], total: int, shown: int = 4) -> str:
    """'all 64 nodes', 'node a', 'nodes a, b, c, d and 3 more'."""
    if len(nodes) == total and total > 1:
        return f"all {total} nodes"
    head = ", ".join(nodes[:shown])
    more = f" and {len(nodes) - shown} more" if len(nodes) > shown else ""
    return f"node{'s' if len(nodes) > 1 else ''} {head}{more}"


def differences(cluster: Cluster, plan: Plan) -> tuple[Difference, ...]:
    """Every cross-node difference that matters to Ray or verl, the most common value first."""
    minor = minor_of(plan.python)
    checks: list[tuple[str, Callable[[ClusterNode], str], str]] = [
        (
            f"Python {minor} on the nodes",
            lambda n: _pythons(n, minor),
            f"the install uses the exact {plan.python} where a node has it, else fetches it; Ray refuses a "
            "worker whose Python patch differs from the head's",
        ),
        ("glibc", lambda n: n.host.os.glibc or UNSET, "wheels and a shared venv differ between the nodes"),
        ("ray on PATH", _ray, "a ray of another version cannot join the cluster (`ray start` fails)"),
        ("GPU count", lambda n: str(len(n.host.gpus)), "verl's trainer.n_gpus_per_node is one number"),
        (
            "CUDA_VISIBLE_DEVICES",
            lambda n: n.host.env.get("CUDA_VISIBLE_DEVICES", UNSET),
            "Ray and verl see different GPUs on the nodes that set it",
        ),
    ]
    names = sorted(
        {k for n in cluster.nodes for k in n.host.env if k.startswith(("NCCL_", "GLOO_"))}
        | {k for n in cluster.nodes for k in n.host.env if k in HF_VARIABLES}
    )
    for name in names:
        why = (
            "ranks that disagree on the collective's settings hang or fail at the first all-reduce"
            if name.startswith(("NCCL_", "GLOO_"))
            else "nodes with different Hugging Face caches download the model again or miss it offline"
        )
        checks.append((name, _env_reader(name), why))
    found = []
    for what, read, why in checks:
        groups: dict[str, list[str]] = {}
        for node in cluster.nodes:
            groups.setdefault(read(node), []).append(node.label)
        if len(groups) > 1:
            ordered = sorted(groups.items(), key=lambda kv: -len(kv[1]))
            found.append(Difference(what=what, groups=tuple((v, tuple(n)) for v, n in ordered), why=why))
    return tuple(found)


def _env_reader(name: str) -> Callable[[ClusterNode], str]:
    return lambda node: node.host.env.get(name, UNSET)


def _pythons(node: ClusterNode, minor: str) -> str:
    versions = sorted({p.version for p in node.host.pythons if p.version.startswith(minor + ".")})
    return ", ".join(versions) or "none"


def _ray(node: ClusterNode) -> str:
    tool = next((t for t in node.host.tools if t.name == "ray"), None)
    return "none" if tool is None else (tool.version or "unknown version")


def grouped(per_node: Sequence[Sequence[str]], labels: Sequence[str]) -> list[str]:
    """Each distinct line once, prefixed with the nodes it holds for unless it holds for all."""
    nodes: dict[str, list[str]] = {}
    for label, lines in zip(labels, per_node, strict=True):
        for line in lines:
            nodes.setdefault(line, []).append(label)
    return [
        line if len(who) == len(labels) else f"{nodes_words(who, len(labels))}: {line}"
        for line, who in nodes.items()
    ]

"""`plan --cluster FILE`: one row for every node of a cluster file, as text or the JSON envelope."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import plan_inputs
from verl_setup.commands.text_output import selected_lines
from verl_setup.output import envelope
from verl_setup.plan.cluster import ClusterPlan, NodePlan
from verl_setup.plan.cluster_differences import nodes_words
from verl_setup.plan.make import make_cluster_plan
from verl_setup.util.bounded import one_line


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Print the cluster plan; a cluster no row fits is exit 3 (raised by plan_cluster)."""
    plan = make_cluster_plan(plan_inputs(args), Path(args.cluster), env)  # this command's one use case
    out.write(envelope("plan", plan.to_json()) if args.json else cluster_text(plan, explain=args.explain))
    return 0


def cluster_text(cp: ClusterPlan, *, explain: bool) -> str:
    """`plan --cluster` without --json."""
    total = len(cp.nodes)
    how = f", gathered through {cp.cluster.how}" + (
        f" at {cp.cluster.gathered_at}" if cp.cluster.gathered_at else ""
    )
    lines = selected_lines(cp.plan, suffix=f", for all {total} nodes{how}")
    groups: dict[str, list[str]] = {}
    for node in cp.nodes:
        groups.setdefault(_node_facts(node, cp.plan.row.id), []).append(node.node.label)
    lines.append("nodes")
    for facts, labels in groups.items():
        lines.append(f"  {nodes_words(labels, total)}: {facts}")
    for m in cp.cluster.missing:
        # K1: a cluster file's text, one line whatever it holds
        lines.append(one_line(f"  missing {m.name} ({m.ip or 'no address'}): {m.reason}", 600))
    for verdict in cp.held_back:
        lines.append(
            f"held back  {verdict.id} (what {nodes_words(verdict.picked_by, total)} would get alone); "
            f"to have it on every node:"
        )
        for b in verdict.blockers:
            lines.append(f"  {nodes_words(b.nodes, total)}: {b.change} ({'; '.join(b.reasons)})")
        lines.append(f"  or keep {cp.plan.row.id} for all {total} nodes")
    lines += [f"differs    {d.line(total)}" for d in cp.differences]
    lines += [f"warning    {w}" for w in cp.warnings]
    if explain:
        lines.append("rejected")
        for r in cp.plan.rejected:
            lines.append(f"  {r.id}")
            lines += [f"      - {reason}" for reason in r.reasons]
    else:
        lines.append(f"rejected   {len(cp.plan.rejected)} other rows (--explain says why)")
    return "\n".join(lines) + "\n"


def _node_facts(node: NodePlan, chosen: str) -> str:
    """The facts that decided the row for this node, in one line."""
    t, host = node.target, node.node.host
    driver = f"driver {t.driver.value}" if t.driver.value is not None else "no NVIDIA driver"
    names: dict[str, int] = {}
    for gpu in t.gpus.value:
        key = f"{gpu.name} (sm {gpu.compute_capability})"
        names[key] = names.get(key, 0) + 1
    gpus = ", ".join(f"{n}x {name}" for name, n in names.items()) or "no GPU"
    pythons = ", ".join(sorted({p.version for p in host.pythons})) or "none"
    own = "the same row alone" if node.own_row == chosen else f"alone: {node.own_row or 'no row fits'}"
    return f"{driver}, {gpus}, {host.os.arch}, glibc {host.os.glibc or '?'}, Pythons {pythons} ({own})"

"""The ranks a launch starts and an NCCL timeout's lines never name: with verl's trainer.nnodes x
trainer.n_gpus_per_node from the run's own launch line, ranks 4-7 of a 2 x 4 launch missing from a
timeout that ranks 0-3 report are the other node, which never reached the collective (its own
failure is in its own log)."""

from __future__ import annotations

from collections.abc import Sequence

from verl_setup.diagnose.launch import launch_values
from verl_setup.diagnose.scan import Hit


def _span(ranks: list[int]) -> str:
    """0,1,2,3 -> '0-3'; a broken run stays a list."""
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(map(str, ranks))


def never_reported(seen: set[int], launch: Sequence[Hit]) -> tuple[str, str] | None:
    """(summary clause, remedy) for the launch's ranks no line names, or None (no launch line,
    no sizes in it, or every rank seen)."""
    if not launch or not seen:
        return None
    values = launch_values(launch[0])
    nodes, per_node = values.get("trainer.nnodes"), values.get("trainer.n_gpus_per_node")
    if not isinstance(nodes, int) or not isinstance(per_node, int) or nodes * per_node <= 1:
        return None
    missing = sorted(set(range(nodes * per_node)) - seen)
    if not missing:
        return None
    node_ids = sorted({r // per_node for r in missing})
    whole = all(set(range(n * per_node, (n + 1) * per_node)) <= set(missing) for n in node_ids)
    where = (
        f"node {', '.join(str(n + 1) for n in node_ids)} of {nodes} ({per_node} ranks per node)"
        if whole
        else f"on node(s) {', '.join(str(n + 1) for n in node_ids)}"
    )
    clause = (
        f"; rank(s) {_span(missing)} of the launch's {nodes * per_node} (trainer.nnodes={nodes} x "
        f"trainer.n_gpus_per_node={per_node}) never reported: {where}, which never reached this "
        "collective"
    )
    node = where.split(" (", maxsplit=1)[0]
    remedy = (
        f"read the log of {node} (its Ray worker .err files or its Slurm output): the first failure "
        "is there, and this timeout is its symptom"
    )
    return clause, remedy

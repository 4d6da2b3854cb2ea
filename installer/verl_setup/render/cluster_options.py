"""render --cluster: what a cluster file says about the rendered Ray and Slurm files.

The node count, the GPUs per node (verl's trainer.n_gpus_per_node is one number: the smallest
count, with a warning when they differ), the head's address, and NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME
from the interface each node's kernel routes to the head through (what `doctor collective`
suggests, read on every node by detect): one name when they agree, else NCCL's comma list of
prefixes. A flag the user gave wins over the file.
"""

from __future__ import annotations

import dataclasses

from verl_setup.host.cluster_file import Cluster
from verl_setup.render.templates import RenderOptions

DEFAULT_HEAD = "127.0.0.1"  # --head-ip's default: the file's head address replaces it


def cluster_options(options: RenderOptions, cluster: Cluster) -> tuple[RenderOptions, list[str]]:
    """`options` with the cluster's nodes, GPUs, head and interface; the warnings to print."""
    warnings = []
    counts = {n.label: len(n.host.gpus) for n in cluster.nodes}
    gpus = min(counts.values())
    if len(set(counts.values())) > 1:
        odd = ", ".join(f"{label} ({count})" for label, count in counts.items() if count != gpus)
        warnings.append(
            f"GPU counts differ between the nodes: rendering {gpus} per node (the smallest); also have {odd}"
        )
    ifaces = sorted({n.iface_to_head for n in cluster.nodes if n.iface_to_head})
    iface = options.iface or (",".join(ifaces) if ifaces else None)
    if len(ifaces) > 1 and not options.iface:
        warnings.append(
            f"the nodes route to the head through different interfaces ({', '.join(ifaces)}): "
            f"NCCL_SOCKET_IFNAME={iface} lists them all (NCCL takes it as prefixes)"
        )
    head = next((n for n in cluster.nodes if n.head), cluster.nodes[0])
    head_ip = head.ip if options.head_ip == DEFAULT_HEAD and head.ip else options.head_ip
    targets = options.targets
    if iface and "env" not in targets and {"ray", "slurm"} & set(targets):
        targets = (*targets, "env")  # the scripts source env.sh, where the interface is set
        warnings.append(f"also rendering env.sh: it sets NCCL_SOCKET_IFNAME={iface} for the scripts")
    changed = dataclasses.replace(
        options,
        targets=targets,
        nodes=len(cluster.nodes) if options.nodes == 1 else options.nodes,
        gpus_per_node=options.gpus_per_node if options.gpus_per_node is not None else gpus,
        iface=iface,
        head_ip=head_ip,
    )
    if cluster.missing:
        warnings.append(
            f"{len(cluster.missing)} node(s) of the cluster file gave no facts and are not counted"
        )
    return changed, warnings

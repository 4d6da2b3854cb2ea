"""detect --ray's task (cluster/detect.py), run on each node by ray_every_node.py: `detect --json`
from the package Ray shipped, or from the node's own verl-setup (`installed`)."""

from __future__ import annotations

from typing import Any


def _probe(reach: str, head: str) -> dict[str, Any]:
    import json
    import socket
    import subprocess

    if reach == "installed":
        try:
            argv = ["verl-setup", "detect", "--json"]
            out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        except FileNotFoundError:
            raise RuntimeError(  # noqa: B904  # the node's words, not the lookup's
                "no verl-setup on this node's PATH (install it, or leave out --installed)"
            )
        if out.returncode:
            tail = (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]
            raise RuntimeError("verl-setup detect --json failed on this node: " + tail)
        host = json.loads(out.stdout)
    else:
        from verl_setup.host.detect import detect

        host = json.loads(detect().to_json())
    try:  # doctor collective's NCCL_SOCKET_IFNAME suggestion, read on this node
        from verl_setup.doctor.probes.network import route_interface

        iface = route_interface(head)
    except ImportError:  # --installed: this worker's Python may not have the package
        iface = None
    return {"hostname": socket.gethostname(), "host": host, "iface_to_head": iface}

"""Run as a script in a child process (any Python 3.8+, Ray optional): probe a Ray head, print JSON.

The parent kills this process if it hangs; every step here also has its own short timeout.
Where Ray is importable, Ray's own functions decide which address a client dials, so the answer
is what `ray.init()` would do in this environment, not our guess.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.request
from typing import Any

STEP_TIMEOUT = 3.0
LOOPBACK = ("localhost", "127.0.0.1", "::1")


def split(address: str) -> tuple[str, int]:
    """host, port of 'host:port' (IPv6 in brackets allowed)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def own_node_ip() -> str:
    """Ray's rule: loopback if clustering is disabled, else the address routing picks."""
    value = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    if value is not None and value.lower() not in ("true", "1"):
        return "127.0.0.1"
    try:
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            probe.connect(("8.8.8.8", 80))  # UDP: no packet is sent, routing picks the source
            return str(probe.getsockname()[0])
        finally:
            probe.close()
    except OSError:
        return "127.0.0.1"


def resolve(address: str, ray_loaded: bool) -> tuple[str, str]:
    """The GCS address ray.init(address) would dial from this environment."""
    if ray_loaded:
        try:
            from ray._private import services  # Ray is optional in the probed env

            resolved = services.canonicalize_bootstrap_address(address)
            return str(resolved), str(services.get_node_ip_address())  # type: ignore[no-untyped-call, unused-ignore]
        except Exception:  # noqa: S110  # a broken Ray install: fall back to its rules below
            pass
    host, port = split(address)
    node_ip = own_node_ip()
    return f"{node_ip if host in LOOPBACK else host}:{port}", node_ip


def tcp(address: str) -> dict[str, Any]:
    start = time.monotonic()
    try:
        host, port = split(address)
        socket.create_connection((host, port), timeout=STEP_TIMEOUT).close()
        return {"ok": True, "ms": round((time.monotonic() - start) * 1000, 1)}
    except (OSError, ValueError) as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def gcs(address: str) -> dict[str, Any]:
    """Cluster metadata, alive nodes and the dashboard URL, straight from the GCS."""
    from ray._raylet import (  # type: ignore[attr-defined, unused-ignore]  # compiled, optional
        GcsClient,
    )

    client = GcsClient(address=address)
    meta = client.internal_kv_get(b"CLUSTER_METADATA", namespace=b"cluster", timeout=STEP_TIMEOUT)
    webui = client.internal_kv_get(b"webui:url", namespace=b"dashboard", timeout=STEP_TIMEOUT)
    nodes = []
    for info in client.get_all_node_info(timeout=STEP_TIMEOUT).values():
        nodes.append(
            {
                "address": info.node_manager_address,
                "hostname": info.node_manager_hostname,
                "alive": info.state == 0,  # GcsNodeInfo.ALIVE
                "head": bool(info.is_head_node),
                "gpus": dict(info.resources_total).get("GPU", 0.0),
                "raylet_socket": info.raylet_socket_name,
            }
        )
    return {
        "metadata": json.loads(meta) if meta else None,
        "webui_url": webui.decode() if webui else None,
        "nodes": nodes,
    }


def http(url: str) -> dict[str, Any]:
    start = time.monotonic()
    try:
        # The URL is a Ray dashboard address the user gave or the GCS recorded.
        with urllib.request.urlopen(url.rstrip("/") + "/api/version", timeout=STEP_TIMEOUT) as reply:  # noqa: S310
            body = json.loads(reply.read().decode() or "{}")
        return {"ok": True, "ms": round((time.monotonic() - start) * 1000, 1), "version": body}
    except (OSError, ValueError) as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def main() -> None:
    args = json.loads(sys.argv[1])
    out: dict[str, Any] = {
        "python": "{}.{}.{}".format(*sys.version_info[:3]),
        "executable": sys.executable,
        "cluster_env": os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"),
    }
    try:
        from importlib import metadata  # keeps the script's start minimal

        out["ray"] = metadata.version("ray")
    except Exception:  # no Ray (or no metadata): probe by TCP only
        out["ray"] = None
    gcs_address = args.get("gcs")
    if gcs_address:
        out["resolved"], out["node_ip"] = resolve(gcs_address, out["ray"] is not None)
        out["tcp_given"] = tcp(gcs_address)
        out["tcp_resolved"] = tcp(out["resolved"])
        if out["tcp_resolved"]["ok"] and out["ray"] is not None and not args.get("tcp_only"):
            try:
                out["gcs"] = gcs(out["resolved"])
            except Exception as exc:  # any GCS client failure is a finding
                out["gcs_error"] = f"{type(exc).__name__}: {exc}"
    dashboard = args.get("dashboard") or (out.get("gcs") or {}).get("webui_url")
    if dashboard:
        url = dashboard if "://" in dashboard else "http://" + dashboard
        out["dashboard"] = dict(http(url), url=url)
    sys.stdout.write(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()

"""Is anything listening at a Ray address? One TCP connect with a short timeout, asked before a
probe that waits a minute or more for an answer that cannot come (issue 32: the collective check
waited 105 s on a port where nothing listened, then blamed NCCL)."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

REACH_TIMEOUT = 3.0


def host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a GCS address, a ray:// client URL or a dashboard URL; None if it names none."""
    parts = urlsplit(address if "://" in address else f"//{address}")
    try:
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return parts.hostname, port


def unreachable(address: str, timeout: float = REACH_TIMEOUT) -> str | None:
    """Why nothing answers at `address` (refused, timed out, no such host), or None if a TCP
    connection opens (or the address names no port to try)."""
    found = host_port(address)
    if found is None:
        return None
    host, port = found
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except ConnectionRefusedError:
        return f"connection refused at {host}:{port}: nothing listens there"
    except TimeoutError:
        return f"no TCP answer from {host}:{port} within {timeout:g} s (a firewall, or a host that is down)"
    except OSError as exc:
        return f"cannot connect to {host}:{port}: {exc.strerror or exc}"

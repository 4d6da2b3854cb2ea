"""Which local interface the kernel routes to an address through (the NCCL_SOCKET_IFNAME to suggest)."""

from __future__ import annotations

import ipaddress
import socket
import struct
from pathlib import Path

PROC_ROUTE = Path("/proc/net/route")


def route_interface(host: str, table: Path = PROC_ROUTE) -> str | None:
    """The interface of the longest-prefix IPv4 route to `host` (lo for loopback); None if unknown."""
    try:
        address = ipaddress.ip_address(socket.gethostbyname(host))
    except (OSError, ValueError):
        return None
    if address.is_loopback:
        return "lo"
    try:
        rows = table.read_text(encoding="ascii").splitlines()[1:]
    except OSError:
        return None
    best: tuple[int, str] | None = None
    target = int(address)
    for row in rows:
        fields = row.split()
        if len(fields) < 8:
            continue
        # The kernel prints addresses as host-order hex (little-endian on x86 and arm64).
        destination = _address(fields[1])
        mask = _address(fields[7])
        if target & mask == destination & mask:
            prefix = bin(mask).count("1")
            if best is None or prefix > best[0]:
                best = (prefix, fields[0])
    return best[1] if best else None


def _address(hex_text: str) -> int:
    return int(ipaddress.IPv4Address(struct.pack("<I", int(hex_text, 16))))

"""Read an NCCL_DEBUG=INFO log: which interfaces NCCL chose, which plugin it loaded, what it was told.

Lines look like `host:pid:tid [dev] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>` (older
releases drop the `NCCL`, some wrappers prefix their own columns), so every rule searches a line
rather than anchoring it. The classifier names a cause only from lines NCCL itself printed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Cause = Literal[
    "loopback", "link-local", "container-bridge", "unreachable", "plugin", "p2p", "timeout", "variables"
]

_HOST = re.compile(r"(?:^|\s)([\w.-]+):\d+:\d+ \[\d+\]")
# `Using [0]eth0:10.0.0.5<0> [1]ib0:...` (2.4+) and `Using interface eth0:10.0.0.5<0>` (2.2-2.3).
_USING = re.compile(r"(?:NET/Socket|Bootstrap|NET) : Using (.*)$")
_IFACE = re.compile(r"(?:\[\d+\]|interface |^|\s)([A-Za-z][\w.-]*):([0-9a-fA-F.:%\w]+)<\d+>")
_SET_BY_ENV = re.compile(r"\b(NCCL_\w+) set by environment to (\S+?)\.?$")
_NO_PLUGIN = re.compile(r"No plugin found|Could not find: libnccl-net|libnccl-net\.so: cannot open")
_PLUGIN_LOADED = re.compile(r"Plugin Path : (\S+)|Loaded net plugin (\S+)|NET/OFI ")
# `misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 169.254.0.1<40815> failed : ...`
_CONNECT = re.compile(r"Connect to (\S+?)<(\d+)> failed(?: : (.*))?")
_P2P_OFF = re.compile(r"P2P is disabled between connected GPUs")
_TIMEOUT = re.compile(
    r"Connection timed out|Watchdog caught collective operation timeout|failed to pass monitoredBarrier"
    r"|Connection closed by remote peer|Timed out|timed out after"
)

# A line that shows the cause by itself, and what to do.
_LINE_RULES: tuple[tuple[re.Pattern[str], Cause, str], ...] = (
    (
        _P2P_OFF,
        "p2p",
        "these GPUs have no working peer-to-peer path (consumer PCIe cards, or an IOMMU / ACS "
        "setting): if the first collective hangs, export NCCL_P2P_DISABLE=1 on every node",
    ),
    (
        _TIMEOUT,
        "timeout",
        "a peer never answered: check that every node reaches the others on the chosen interface "
        "(firewall, security group) and that NCCL_SOCKET_IFNAME names it; if they all do and a big "
        "all-gather is only slow, raise actor_rollout_ref.nccl_timeout (verl 0.9: 600 s)",
    ),
)


@dataclass(frozen=True, kw_only=True)
class NcclCause:
    """One cause found in the log, the line that shows it, and what to do."""

    cause: Cause
    line: str
    remedy: str


def chosen_interfaces(log: str) -> dict[str, str]:
    """interface -> address, for every interface NCCL said it uses."""
    found: dict[str, str] = {}
    for line in log.splitlines():
        m = _USING.search(line)
        if m:
            for name, address in _IFACE.findall(m[1]):
                found.setdefault(name, address)
    return found


def variables_seen(log: str) -> dict[str, str]:
    """NCCL_* variables NCCL reported as set in its own process."""
    return {m[1]: m[2] for line in log.splitlines() if (m := _SET_BY_ENV.search(line))}


def interface_kind(name: str, address: str) -> Cause | None:
    """Why an interface cannot carry traffic between nodes, if it cannot."""
    if name == "lo":
        return "loopback"
    if name.startswith(("docker", "veth", "br-", "virbr", "cni", "flannel")):
        return "container-bridge"
    return address_kind(address)


def address_kind(address: str) -> Cause | None:
    """Why an address alone cannot reach another node: loopback, link-local, or Docker's bridge."""
    bare, _, scope = address.lower().partition("%")  # fe80::1%ib1: the zone names the interface
    if bare.startswith("127.") or bare == "::1":
        return "loopback"
    if bare.startswith(("169.254.", "fe80:")):
        return "link-local"
    # 172.17.0.0/16 is the subnet of Docker's default bridge network (docker0).
    if bare.startswith("172.17.") or scope.startswith(("docker", "veth", "br-")):
        return "container-bridge"
    return None


def connect_failures(lines: Iterable[str]) -> list[NcclCause]:
    """`Connect to <addr> failed` lines, one per address, named by the address's class."""
    found: dict[str, NcclCause] = {}
    for line in lines:
        m = _CONNECT.search(line)
        if m is None or m[1] in found:
            continue
        kind = address_kind(m[1])
        if kind is None:
            remedy = (
                f"{m[1]} is routable but did not accept NCCL's connection on port {m[2]}: a firewall "
                "or security group between the nodes (NCCL uses random ports), or the peer process "
                "had already died (read its log first)"
            )
        else:
            remedy = (
                f"NCCL tried {m[1]}, a {kind} address that other nodes cannot reach: set "
                "NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to the interface that routes between "
                "the nodes, on every node before `ray start`"
            )
        found[m[1]] = NcclCause(cause=kind or "unreachable", line=line.strip(), remedy=remedy)
    return list(found.values())


def classify(log: str, *, shell_env: Mapping[str, str] | None = None) -> list[NcclCause]:
    """Every cause the log shows, in a fixed order; `shell_env` adds the variables check."""
    lines = log.splitlines()
    found: list[NcclCause] = []
    for name, address in chosen_interfaces(log).items():
        kind = interface_kind(name, address)
        if kind is not None:
            line = _first(lines, f"{name}:{address}")
            found.append(
                NcclCause(
                    cause=kind,
                    line=line,
                    remedy=f"NCCL chose {name} ({address}), which other nodes cannot reach: set "
                    "NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to the interface that routes to the "
                    "head, on every node before `ray start`",
                )
            )
    seen = {d.line for d in found}
    found += [d for d in connect_failures(lines) if d.line not in seen]
    found += _plugins(lines)
    for pattern, cause, remedy in _LINE_RULES:
        shown = next((ln for ln in lines if pattern.search(ln)), None)
        if shown is not None:
            found.append(NcclCause(cause=cause, line=shown.strip(), remedy=remedy))
    if shell_env is not None:
        found += missing_variables(shell_env, variables_seen(log), where="the NCCL log")
    return found


def missing_variables(
    shell_env: Mapping[str, str], worker_env: Mapping[str, str], *, where: str
) -> list[NcclCause]:
    """NCCL_*/GLOO_* set in this shell but absent (or different) in the workers."""
    found = []
    for name, value in sorted(shell_env.items()):
        if not name.startswith(("NCCL_", "GLOO_")) or name == "NCCL_DEBUG":
            continue
        seen = worker_env.get(name)
        if seen == value:
            continue
        state = "absent" if seen is None else f"{seen!r}"
        found.append(
            NcclCause(
                cause="variables",
                line=f"{name}={value!r} here, {state} in {where}",
                remedy=f"Ray workers inherit the environment of `ray start`, not of this shell: export "
                f"{name} before `ray start` on every node, or pass it in runtime_env env_vars",
            )
        )
    return found


def hosts(lines: Iterable[str]) -> set[str]:
    """The host names in NCCL's line prefixes."""
    return {m[1] for ln in lines if (m := _HOST.search(ln))}


def _plugins(lines: list[str]) -> list[NcclCause]:
    """No net plugin at all (TCP sockets only), or a plugin on some hosts and not on others."""
    missing = [ln for ln in lines if _NO_PLUGIN.search(ln)]
    loaded = [ln for ln in lines if _PLUGIN_LOADED.search(ln)]
    if not missing:
        return []
    if loaded:
        without, with_ = sorted(hosts(missing)), sorted(hosts(loaded))
        return [
            NcclCause(
                cause="plugin",
                line=missing[0].strip(),
                remedy=f"the NCCL net plugin loads on {', '.join(with_) or 'some nodes'} but not on "
                f"{', '.join(without) or 'others'}: every node needs the same libnccl-net.so (IB/SHARP or "
                "aws-ofi-nccl for EFA) on its LD_LIBRARY_PATH, or NCCL ranks disagree on the transport",
            )
        ]
    return [
        NcclCause(
            cause="plugin",
            line=missing[0].strip(),
            remedy="NCCL found no net plugin and falls back to TCP sockets: on an InfiniBand or AWS EFA "
            "cluster install the plugin (aws-ofi-nccl for EFA) on every node; on plain Ethernet this "
            "is expected",
        )
    ]


def _first(lines: list[str], needle: str) -> str:
    return next((ln.strip() for ln in lines if needle in ln), needle)

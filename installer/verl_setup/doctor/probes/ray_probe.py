"""Ray probes: which head to ask, the child process that asks it, and the local raylets' Python.

The network part runs in a child (scripts/ray_head.py) under a hard timeout: a Ray client that cannot
reach its GCS retries for minutes and ignores SIGTERM, so only SIGKILL of its group ends it.
Not named ray.py: the child runs as a script from this folder, which is then first on its
sys.path, and a ray.py here would shadow Ray itself.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from verl_setup.doctor.probes.env import TargetEnv
from verl_setup.scripts import script_path
from verl_setup.util.runner import ProgramError, run

CHILD_TIMEOUT = 20.0
PY_TIMEOUT = 5.0
CHILD = script_path("ray_head")
LOOPBACK = ("localhost", "127.0.0.1", "::1")

AddressKind = Literal["gcs", "dashboard", "client"]


@dataclass(frozen=True, kw_only=True)
class WorkerPython:
    """The interpreter a local raylet starts its Python workers with."""

    node: str
    python: str
    version: str | None


@dataclass(frozen=True, kw_only=True)
class RayReading:
    """What the child saw at the address, and how long it was given."""

    address: str
    source: str
    kind: AddressKind
    probe_python: str
    child: dict[str, Any] | None
    error: str | None
    workers: tuple[WorkerPython, ...] = ()


def address_file(env: Mapping[str, str]) -> Path:
    """Where `ray start` records the head for `address="auto"` (Ray's own temp-dir rule)."""
    base = env.get("RAY_TMPDIR") or env.get("TMPDIR") or "/tmp"  # noqa: S108  # Ray's default
    return Path(base) / "ray" / "ray_current_cluster"


def find_address(flag: str | None, env: Mapping[str, str]) -> tuple[str, str] | None:
    """flag > RAY_ADDRESS > the running local head's file; "auto" means "look for the file"."""
    if flag and flag != "auto":
        return flag, "flag --ray-address"
    if env.get("RAY_ADDRESS") and env["RAY_ADDRESS"] != "auto":
        return env["RAY_ADDRESS"], "env RAY_ADDRESS"
    file = address_file(env)
    try:
        text = file.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return (text, f"file {file} (written by `ray start`)") if text else None


def split_address(address: str) -> tuple[AddressKind, str]:
    """('gcs', 'host:port') for a GCS address; dashboard (http) and Ray client (ray://) URLs."""
    if address.startswith(("http://", "https://")):
        return "dashboard", address
    if address.startswith("ray://"):
        return "client", address.removeprefix("ray://")
    return "gcs", address


def probe_ray(address: str | None, env: Mapping[str, str], target: TargetEnv | None) -> RayReading | None:
    """Run the child against the address given or found in `env`; None if there is none."""
    found = find_address(address, env)
    if found is None:
        return None
    address, source = found
    kind, value = split_address(address)
    python = _probe_python(target)
    args = {
        "gcs": value if kind != "dashboard" else None,
        "tcp_only": kind == "client",
        "dashboard": value if kind == "dashboard" else None,
    }
    child: dict[str, Any] | None = None
    error = None
    try:
        out = run([python, str(CHILD), json.dumps(args)], timeout=CHILD_TIMEOUT, env=env)
        if out.returncode == 0:
            child = json.loads(out.stdout)
        else:
            error = (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
    except ProgramError as exc:
        error = str(exc)
    except json.JSONDecodeError as exc:
        error = f"unreadable answer: {exc}"
    workers = _local_workers(child)
    return RayReading(
        address=address,
        source=source,
        kind=kind,
        probe_python=python,
        child=child,
        error=error,
        workers=workers,
    )


def _probe_python(target: TargetEnv | None) -> str:
    """The env's interpreter when it has Ray (its Ray decides the address), else ours if we have Ray."""
    if target is not None and "ray" in target.dists:
        return target.python
    if importlib.util.find_spec("ray") is not None:
        return sys.executable
    return target.python if target is not None else sys.executable


def _local_workers(child: dict[str, Any] | None) -> tuple[WorkerPython, ...]:
    """For every alive node whose raylet runs on this machine: its workers' interpreter."""
    nodes = ((child or {}).get("gcs") or {}).get("nodes") or []
    found = []
    for node in nodes:
        socket = node.get("raylet_socket") or ""
        if not node.get("alive") or not socket or not Path(socket).exists():
            continue
        python = raylet_worker_python(socket)
        if python is None:
            continue
        found.append(
            WorkerPython(node=str(node.get("address")), python=python, version=python_version(python))
        )
    return tuple(found)


def raylet_worker_python(socket: str, proc: Path = Path("/proc")) -> str | None:
    """The first word of the raylet's --python_worker_command, found by its socket path."""
    needle = f"--raylet_socket_name={socket}".encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if needle not in argv:
            continue
        for arg in argv:
            if arg.startswith(b"--python_worker_command="):
                words = arg.decode(errors="replace").partition("=")[2].split()
                return words[0] if words else None
    return None


def python_version(python: str) -> str | None:
    """`python --version`, as X.Y.Z."""
    try:
        out = run([python, "--version"], timeout=PY_TIMEOUT)
    except ProgramError:
        return None
    m = re.search(r"Python (\d+\.\d+\.\d+)", out.stdout + out.stderr)
    return m[1] if m else None

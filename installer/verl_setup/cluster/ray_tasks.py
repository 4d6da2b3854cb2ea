"""One task pinned to every alive node of a Ray cluster (verify --ray, detect --ray, install --ray).

The driver runs in a child process of an interpreter that has ray (it must match the cluster's
Ray and Python) under a hard timeout: a client that cannot reach the head hangs in ray.init and
ignores SIGTERM, so it is SIGKILLed. The task is a function of a file in scripts/, scheduled with
NodeAffinitySchedulingStrategy(soft=False) on each node; nodes Ray lists as dead are reported too.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_setup.errors import CheckFailedError
from verl_setup.scripts import Script, script_path
from verl_setup.util.runner import ProgramError, run, stream

RESULT_MARK = "VERL_SETUP_RESULT "  # as scripts/ray_every_node.py writes it


@dataclass(frozen=True, kw_only=True)
class Answers:
    """What each alive node's task returned (`probe`) or why not (`error`), and the dead nodes."""

    nodes: list[dict[str, Any]]
    dead: list[dict[str, Any]]


def loopback_env(address: str, env: Mapping[str, str]) -> dict[str, str]:
    """For a cluster on 127.0.0.1, keep the client on loopback (Ray would swap in the host's IP)."""
    out = dict(env)
    host = address.rsplit(":", 1)[0].strip("[]") if ":" in address else address
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        out.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    return out


def run_on_every_node(
    python: Path,
    address: str,
    task: tuple[Script, str],
    *,
    timeout: float,
    env: Mapping[str, str],
    what: str,
    runtime_env: Mapping[str, Any] | None = None,
    args: tuple[Any, ...] = (),
    task_timeout: float | None = None,
    live: bool = False,
    only: Sequence[str] = (),
) -> Answers:
    """Run `function(*args)` of the script `task` = (script, function) once on each alive node (or
    those in `only`: node ids, or ["head"])."""
    wait = task_timeout if task_timeout is not None else max(5.0, timeout * 0.75)
    script, function = task
    argv = [
        str(python),
        str(script_path("ray_every_node")),
        str(script_path(script)),
        function,
        address,
        f"{wait:g}",
        json.dumps(runtime_env or {}),
        json.dumps(args),
    ]
    argv.append(json.dumps(list(only)))
    try:
        if live:  # the driver's per-node lines reach the terminal as they come
            out = stream(argv, timeout=timeout, env=loopback_env(address, env), passthrough=True)
        else:
            out = run(argv, timeout=timeout, env=loopback_env(address, env))
    except ProgramError as exc:
        raise CheckFailedError(f"Ray cluster at {address}: {exc} (is the head reachable from here?)") from exc
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(RESULT_MARK)]
    if not lines:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise CheckFailedError(f"Ray cluster at {address}: the {what} task failed ({tail})")
    data = json.loads(lines[-1][len(RESULT_MARK) :])
    if "error" in data:
        raise CheckFailedError(f"cannot {what} the Ray cluster at {address} from {python}: {data['error']}")
    return Answers(nodes=data["nodes"], dead=data["dead"])

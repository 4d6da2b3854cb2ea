"""One task pinned to every alive node of a Ray cluster (verify --ray, detect --ray, install --ray).

The driver runs in a child process of an interpreter that has ray (it must match the cluster's
Ray and Python) under a hard timeout: a client that cannot reach the head hangs in ray.init and
ignores SIGTERM, so it is SIGKILLed. The task is `_probe()` from the given source, scheduled with
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
from verl_setup.util.runner import ProgramError, run, stream

RESULT_MARK = "VERL_SETUP_RESULT "
_DRIVER = (
    r"""
import json, sys
address, task_timeout = sys.argv[1], float(sys.argv[2])
runtime_env, task_args, only = json.loads(sys.argv[3]), json.loads(sys.argv[4]), json.loads(sys.argv[5])
def done(result):
    sys.stdout.write("\n"""
    + RESULT_MARK
    + r"""" + json.dumps(result) + "\n")
    sys.stdout.flush()
    sys.exit(0)
try:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    ray.init(address=address, logging_level="ERROR", log_to_driver=False,
             **({"runtime_env": runtime_env} if runtime_env else {}))
    every = ray.nodes()
    nodes = [n for n in every if n.get("Alive")]
except Exception as exc:
    done({"error": "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0][:300])})
def why_dead(n):
    said = n.get("DeathReasonMessage")
    return "Ray lists the node as dead" + (": " + said if said else "")
dead = [{"node_id": n["NodeID"], "ip": n.get("NodeManagerAddress"), "reason": why_dead(n)}
        for n in every if not n.get("Alive")]
if only == ["head"]:
    nodes = [n for n in nodes if "node:__internal_head__" in n.get("Resources", {})]
elif only:
    nodes = [n for n in nodes if n["NodeID"] in only]
probe = ray.remote(num_cpus=0, max_retries=0)(_probe)
def pinned(n):
    return probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
refs = [pinned(n).remote(*task_args) for n in nodes]
import time
deadline, ready, waiting = time.monotonic() + task_timeout, [], list(refs)
while waiting and time.monotonic() < deadline:  # as each node finishes: the progress line is live
    done_now, waiting = ray.wait(waiting, num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
    for ref in done_now:
        node = nodes[refs.index(ref)]
        sys.stderr.write("node %s at %s: finished\n" % (node["NodeID"][:8], node["NodeManagerAddress"]))
        sys.stderr.flush()
    ready += done_now
result = []
for node, ref in zip(nodes, refs):
    entry = {"node_id": node["NodeID"], "ip": node["NodeManagerAddress"],
             "head": "node:__internal_head__" in node.get("Resources", {})}
    if ref in ready:
        try:
            entry["probe"] = ray.get(ref)
        except Exception as exc:
            entry["error"] = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[-1][:300])
    else:
        entry["error"] = ("no answer within %gs (Ray refuses workers whose Python differs from the "
                          "head's, or the node is busy or unreachable)" % task_timeout)
    result.append(entry)
done({"nodes": result, "dead": dead})
"""
)


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
    function: str,
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
    """Run `_probe(*args)` (defined by `function`) once on each alive node (or those in `only`:
    node ids, or ["head"])."""
    wait = task_timeout if task_timeout is not None else max(5.0, timeout * 0.75)
    script = function + _DRIVER
    argv = [str(python), "-c", script, address, f"{wait:g}", json.dumps(runtime_env or {}), json.dumps(args)]
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

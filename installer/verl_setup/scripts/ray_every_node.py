"""The Ray driver of cluster/ray_tasks.py: one task pinned to every alive node (or to `only`).

argv: TASK_FILE FUNCTION ADDRESS WAIT RUNTIME_ENV_JSON ARGS_JSON ONLY_JSON. Runs in an interpreter
that has ray. TASK_FILE is read here and run in a namespace of its own (not a module Ray's workers
could import), so Ray ships FUNCTION to the nodes by value: they need nothing of this package. One
line RESULT_MARK + JSON on stdout: {"nodes", "dead"} or {"error"}; a line per finished node on stderr.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, NoReturn

RESULT_MARK = "VERL_SETUP_RESULT "  # cluster/ray_tasks.py reads the line it starts
task_file, function = sys.argv[1], sys.argv[2]
address, task_timeout = sys.argv[3], float(sys.argv[4])
runtime_env, task_args, only = json.loads(sys.argv[5]), json.loads(sys.argv[6]), json.loads(sys.argv[7])


def done(result: dict[str, Any]) -> NoReturn:
    sys.stdout.write("\n" + RESULT_MARK + json.dumps(result) + "\n")
    sys.stdout.flush()
    sys.exit(0)


namespace: dict[str, Any] = {"__name__": "verl_setup_ray_task"}
with open(task_file, encoding="utf-8") as f:
    exec(compile(f.read(), task_file, "exec"), namespace)  # noqa: S102  # this package's own task file
try:
    import ray  # type: ignore[import-not-found, unused-ignore]
    from ray.util.scheduling_strategies import (  # type: ignore[import-not-found, unused-ignore]
        NodeAffinitySchedulingStrategy,
    )

    ray.init(
        address=address,
        logging_level="ERROR",  # type: ignore[arg-type, unused-ignore]  # Ray takes a name too
        log_to_driver=False,
        **({"runtime_env": runtime_env} if runtime_env else {}),
    )
    every: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call, unused-ignore]
    nodes = [n for n in every if n.get("Alive")]
except Exception as exc:
    done({"error": "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0][:300])})


def why_dead(n: dict[str, Any]) -> str:
    said = n.get("DeathReasonMessage")
    return "Ray lists the node as dead" + (": " + said if said else "")


dead = [
    {"node_id": n["NodeID"], "ip": n.get("NodeManagerAddress"), "reason": why_dead(n)}
    for n in every
    if not n.get("Alive")
]
if only == ["head"]:
    nodes = [n for n in nodes if "node:__internal_head__" in n.get("Resources", {})]
elif only:
    nodes = [n for n in nodes if n["NodeID"] in only]
probe = ray.remote(num_cpus=0, max_retries=0)(namespace[function])


def pinned(n: dict[str, Any]) -> Any:
    return probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))


refs = [pinned(n).remote(*task_args) for n in nodes]
deadline, ready, waiting = time.monotonic() + task_timeout, [], list(refs)
while waiting and time.monotonic() < deadline:  # as each node finishes: the progress line is live
    done_now, waiting = ray.wait(waiting, num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
    for ref in done_now:
        node = nodes[refs.index(ref)]
        sys.stderr.write("node %s at %s: finished\n" % (node["NodeID"][:8], node["NodeManagerAddress"]))
        sys.stderr.flush()
    ready += done_now
result = []
for node, ref in zip(nodes, refs):  # noqa: B905  # Ray clusters on Python 3.9 too
    entry = {
        "node_id": node["NodeID"],
        "ip": node["NodeManagerAddress"],
        "head": "node:__internal_head__" in node.get("Resources", {}),
    }
    if ref in ready:
        try:
            entry["probe"] = ray.get(ref)
        except Exception as exc:
            entry["error"] = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[-1][:300])
    else:
        entry["error"] = (
            "no answer within %gs (Ray refuses workers whose Python differs from the "
            "head's, or the node is busy or unreachable)" % task_timeout
        )
    result.append(entry)
done({"nodes": result, "dead": dead})

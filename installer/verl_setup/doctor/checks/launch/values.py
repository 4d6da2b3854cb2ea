"""Launch rules over the values: the rollout engine is one verl knows and is installed, the GPU
memory share is a share, tensor parallel divides the node's GPUs, then verl's batch-size asserts."""

from __future__ import annotations

import re
from collections.abc import Mapping

from verl_setup.doctor.checks.launch.batch_sizes import batch_rules, largest_divisor
from verl_setup.doctor.checks.launch.reader import ACTOR, ROLLOUT, ints, noter
from verl_setup.doctor.probes.launch_command import Resolver
from verl_setup.doctor.probes.verl_config import VerlConfig
from verl_setup.doctor.result import Evidence, Finding

# rollout.name -> the distribution verl imports for it.
ENGINE_DIST = {
    "vllm": "vllm",
    "sglang": "sglang",
    "sglang_async": "sglang",
    "trtllm": "tensorrt-llm",
    "hf": "transformers",
}
# How verl's workers dispatch on rollout.name, across releases.
_ROLLOUT_NAMES = re.compile(
    r'rollout_name == "(\w+)"|rollout_name in \[([^\]]*)\]|RolloutReplicaRegistry\.register\("(\w+)"'
)


def known_rollouts(config: VerlConfig) -> set[str]:
    """The rollout names the installed verl's workers dispatch on (empty if none are found)."""
    workers = config.config_dir.parent.parent / "workers"
    names: set[str] = set()
    for file in [*workers.glob("*.py"), *workers.glob("rollout/*.py")]:
        try:
            text = file.read_text(encoding="utf-8")
        except OSError:
            continue
        for single, listed, registered in _ROLLOUT_NAMES.findall(text):
            names.update(n for n in (single, registered) if n)
            names.update(re.findall(r'"(\w+)"', listed))
    return names


def lint_values(
    r: Resolver, dists: Mapping[str, str], evidence: list[Evidence], known: set[str]
) -> list[Finding]:
    """Engine known and installed, parallel sizes, memory share, and verl's batch-size asserts."""
    findings: list[Finding] = []
    note = noter(r, evidence)
    name = note(f"{ROLLOUT}.name")
    if name == "???":
        findings.append(
            Finding(
                status="fail",
                message=f"{ROLLOUT}.name is mandatory in verl {r.config.version} and not set",
                remedy=f"add {ROLLOUT}.name=vllm (or sglang)",
            )
        )
    elif isinstance(name, str) and known and name not in known:
        findings.append(
            Finding(
                status="fail",
                message=f"rollout.name={name} is not an engine verl {r.config.version} knows "
                f"({', '.join(sorted(known))})",
                remedy=f"set {ROLLOUT}.name to one of {', '.join(sorted(known))}",
            )
        )
    elif isinstance(name, str) and name in ENGINE_DIST and ENGINE_DIST[name] not in dists:
        findings.append(
            Finding(
                status="fail",
                message=f"rollout.name={name} but {ENGINE_DIST[name]} is not installed in this env",
                remedy=f"install a matrix row with the {name} engine (verl-setup install --engine "
                f"{name}), or set rollout.name to an engine that is installed",
            )
        )

    gmu = note(f"{ROLLOUT}.gpu_memory_utilization")
    if isinstance(gmu, (int, float)) and not isinstance(gmu, bool) and not 0 < gmu <= 1:
        findings.append(
            Finding(
                status="fail",
                message=f"gpu_memory_utilization={gmu} is outside (0, 1]: it is a share of GPU memory",
                remedy="use a share such as 0.5 (0.5-0.7 without offload, 0.8-0.9 with offload)",
            )
        )

    per_node = note("trainer.n_gpus_per_node")
    nnodes = note("trainer.nnodes")
    tp = note(f"{ROLLOUT}.tensor_model_parallel_size")
    if ints(per_node, tp) and tp > 0 and per_node % tp:
        findings.append(
            Finding(
                status="fail",
                message=f"tensor_model_parallel_size={tp} does not divide n_gpus_per_node={per_node}",
                remedy=f"use a tensor_model_parallel_size that divides {per_node} (for example "
                f"{largest_divisor(per_node, tp)})",
            )
        )
    if ints(per_node, nnodes) and not note(f"{ACTOR}.use_dynamic_bsz"):
        findings += batch_rules(r, note, per_node * nnodes)
    return findings

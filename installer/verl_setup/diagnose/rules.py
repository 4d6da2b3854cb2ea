"""The failure classes diagnose knows, each with the log text that triggers it (from real logs:
tests/fixtures/diagnose/SOURCES.md), in the order a cause outranks another.

A root cause (tier 0) is something that fails by itself: a kill, an OOM, a bad config, a missing
module, an unreachable peer. A symptom (tier 1) follows from another failure: a peer that died
leaves the others in an NCCL timeout, and Ray reports every dead actor as "a worker died".
A launch line (tier 2) is no failure: the run's own settings, which a verdict may read (the
CUDA-OOM verdict plans the run's memory from them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Literal

ClassId = Literal[
    "import-error",
    "hydra",
    "ray-gcs",
    "resource-wait",
    "gpu-memory-busy",
    "ray-memory-monitor",
    "kernel-oom",
    "kv-cache-memory",
    "cuda-oom",
    "crash-signal",
    "nccl-connect",
    "nccl-error",
    "nccl-timeout",
    "worker-died",
    "launch-line",
    # Ascend NPU and AMD ROCm classes (issue 35); their rules are the block at the end of RULES.
    "hccl-init",
    "hccl-timeout",
    "npu-oom",
    "rccl",
    "unknown",
]


@dataclass(frozen=True, kw_only=True)
class Rule:
    """A class, the regex that finds its lines (searched in a line), and the literals that find
    candidate lines fast: every line the trigger matches contains one of `anchors`."""

    id: ClassId
    tier: int
    trigger: str
    anchors: tuple[bytes, ...]


# Order is precedence: the first root cause in this order that a log shows is the verdict.
RULES: tuple[Rule, ...] = (
    Rule(
        id="import-error",
        tier=0,
        # The exception line of a traceback (optionally behind Ray's "(Name pid=N)" prefix), not a
        # warning that mentions one ("Failed to import from vllm._C with ModuleNotFoundError(...)").
        trigger=r"^(?:\x1b\[[0-9;]*m)*(?:\([^)\n]*\)[ \t]*)?(?:\x1b\[[0-9;]*m)*[ \t]*"
        r"(?:ModuleNotFoundError: No module named|ImportError: )"
        # An import that fails because a package moved after install (antlr4 4.13 under omegaconf's
        # parser generated for 4.9: tests/fixtures/diagnose/drift-antlr4-atn.log).
        r"|^[ \t]*Exception: Could not deserialize ATN with version \d",
        anchors=(b"rror", b"ATN"),
    ),
    Rule(
        id="hydra",
        tier=0,
        trigger=r"Could not override '|is not in struct|ConfigKeyError|ConfigAttributeError"
        r"|OverrideParseException|no viable alternative at input",
        anchors=(b"Could not ", b"struct", b"rror", b"no viable alternative"),
    ),
    Rule(
        id="ray-gcs",
        tier=0,
        # A driver or `ray start --address` that finds no Ray head at the address it was given.
        trigger=r"Failed to connect to GCS at address|Failed to get cluster ID from GCS server"
        r"|Failed to connect to GCS within",
        anchors=(b"GCS ",),
    ),
    Rule(
        id="resource-wait",
        tier=0,
        trigger=r"cannot be scheduled right now|is less than total desired GPUs"
        r"|Failed to schedule placement group|Attempting to start raylet with \d+ GPU"
        r"|Waiting for creating a placement group of specs"
        r"|exceeds the total number of available GPUs in the (?:placement group|cluster)"
        r"|Current node has no GPU available|Not enough GPUs available",
        anchors=(b"schedul", b" GPU", b"placement group"),
    ),
    Rule(
        id="gpu-memory-busy",
        tier=0,
        # vLLM at start: the GPU already holds other memory (another process, the trainer's state).
        trigger=r"Free memory on device (?:\S+ )?\([\d.]+/[\d.]+ GiB\) on startup is less than desired",
        anchors=(b"emory",),
    ),
    Rule(
        id="ray-memory-monitor",
        tier=0,
        trigger=r"Task was killed due to the node running low on memory"
        r"|which exceeds the memory usage threshold of"
        r"|killed due to memory pressure \(OOM\)|System memory low at node",
        anchors=(b"emory",),
    ),
    Rule(
        id="kernel-oom",
        tier=0,
        trigger=r"Out of memory: Kill(?:ed)? process|Memory cgroup out of memory"
        r"|oom-kill event\(s\)|invoked oom-killer|^oom_kill [1-9]",
        anchors=(b"emory", b"oom"),
    ),
    Rule(
        id="kv-cache-memory",
        tier=0,
        trigger=r"No available memory for the cache blocks"
        r"|Not enough memory\. Please try to increase --mem-fraction-static"
        r"|is larger than the maximum number of tokens that can be stored in KV cache"
        r"|KV cache is needed, which is larger than the available KV cache memory",
        anchors=(b"emory", b"KV cache"),
    ),
    Rule(
        id="cuda-oom",
        tier=0,
        trigger=r"CUDA out of memory|OutOfMemoryError: CUDA|(?i:cuda error: out of memory)",
        anchors=(b"emory", b"rror"),
    ),
    Rule(
        id="crash-signal",
        tier=0,
        # A native crash: Ray's (abseil's) signal handler, or CPython's faulthandler.
        trigger=r"\*\*\* SIG(?:SEGV|ABRT|BUS|FPE|ILL) received at time="
        r"|Fatal Python error: (?:Segmentation fault|Aborted|Bus error|Floating point exception"
        r"|Illegal instruction)",
        anchors=(b"received at time", b"rror"),
    ),
    Rule(
        id="nccl-connect",
        tier=0,
        trigger=r"socketStartConnect: Connect to |Connect to \S+<\d+> failed|socketPollConnect",
        anchors=(b"Connect",),
    ),
    Rule(
        id="nccl-error",
        tier=0,
        trigger=r"unhandled system error|ncclSystemError",
        anchors=(b"rror",),
    ),
    Rule(
        id="nccl-timeout",
        tier=1,
        trigger=r"Watchdog caught collective operation timeout",
        anchors=(b"Watchdog",),
    ),
    Rule(
        id="worker-died",
        tier=1,
        trigger=r"The actor died unexpectedly|A worker died or was killed"
        r"|The worker died unexpectedly|ActorDiedError(?!Context)"
        r"|Actor is failed on worker",
        anchors=(b"died", b"rror", b"Actor is failed"),
    ),
    Rule(
        id="launch-line",
        tier=2,
        # Hydra's echo of the overrides when the job fails, or the command (`set -x`, a paste).
        trigger=r"Error executing job with overrides: \[|-m verl\.trainer\.main_\w+",
        anchors=(b"rror", b"verl.trainer.main_"),
    ),
    # --- Ascend NPU and AMD ROCm (issue 35; explain_accel.py). Root causes rank after the ones
    # above; HCCL's socket timeout is a symptom, as NCCL's watchdog timeout is.
    Rule(
        id="hccl-init",
        tier=0,
        # torch_npu's "HCCL function error: hcclCommInitRootInfoConfig(...), error code is N" and
        # CANN's own "HcclCommInitRootInfo failed" (tests/fixtures/diagnose/SOURCES.md).
        trigger=r"HCCL function error|HcclCommInitRootInfo(?:Config)? fail",
        anchors=(b"rror", b"HcclComm"),
    ),
    Rule(
        id="npu-oom",
        tier=0,
        trigger=r"NPU out of memory\. Tried to allocate",
        anchors=(b"NPU out of memory",),
    ),
    Rule(
        id="rccl",
        tier=0,
        # RCCL prints NCCL's WARN lines from its hipified sources.
        trigger=r"/rccl/\S*hipify/src/\S+ NCCL WARN",
        anchors=(b"hipify",),
    ),
    Rule(
        id="hccl-timeout",
        tier=1,
        trigger=r"EI0006: .*Getting socket times out",
        anchors=(b"EI0006",),
    ),
)
CONTEXT_TIER = 2  # rules whose lines are context for a verdict, never a verdict

BY_ID = {r.id: r for r in RULES}


@cache
def triggers() -> tuple[re.Pattern[bytes], tuple[bytes, ...]]:
    """All triggers as one alternation (a named group per class, _ for -), and the anchors."""
    joined = "|".join(f"(?P<{r.id.replace('-', '_')}>{r.trigger})" for r in RULES)
    return re.compile(joined.encode(), re.MULTILINE), anchors()


def anchors() -> tuple[bytes, ...]:
    """Every rule's anchors, without one that contains another (the shorter finds both)."""
    every = {a for r in RULES for a in r.anchors}
    return tuple(sorted(a for a in every if not any(b != a and b in a for b in every)))


def rule_of(group: str) -> Rule:
    """The rule behind a trigger group name."""
    return BY_ID[group.replace("_", "-")]  # type: ignore[index]

"""Findings for the Ascend NPU and AMD ROCm classes: HCCL init and timeout, NPU memory, RCCL.

Only figures the log printed are reported; the remedies name the HCCL/RCCL settings their own
messages and docs name (HCCL_CONNECT_TIMEOUT: CANN's EI0006 solution text, 120 s by default).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from verl_setup.diagnose.finding import LogFinding, evidence_of
from verl_setup.diagnose.scan import Hit

_CODE = re.compile(r"error code is (?P<code>\d+)|errNo\[(?P<errno>0x[0-9A-Fa-f]+)\]")
_RANK = re.compile(r"\[rank(?P<rank>\d+)\]")
_OOM = re.compile(
    r"Tried to allocate (?P<asked>[\d.]+ [GM]iB) \(NPU (?P<npu>\d+); (?P<total>[\d.]+ GiB) total capacity;"
    r".*?(?P<free>[\d.]+ [GM]iB) free"
)
_RCCL = re.compile(r"NCCL WARN (?P<what>.+)$")


def hccl_init(hits: Sequence[Hit]) -> LogFinding:
    """HCCL could not build a communicator: ranks disagree on devices, CANN vs driver, a stale process."""
    facts: dict[str, str] = {}
    for hit in hits:
        if (m := _CODE.search(hit.text)) and "code" not in facts:
            facts["code"] = m["code"] or m["errno"]
        if (r := _RANK.search(hit.text)) and "rank" not in facts:
            facts["rank"] = r["rank"]
    code = f" (error {facts['code']})" if "code" in facts else ""
    return LogFinding(
        cls="hccl-init",
        tier=0,
        summary=f"HCCL could not initialise its communicator{code}: the NPU collectives never started",
        evidence=evidence_of(hits),
        remedy=(
            "read the first ERROR in the plog (~/ascend/log/debug/plog) of the rank that failed: the "
            "RuntimeError is a wrapper, the EI/EJ/EE code there names the cause",
            "every rank must see the NPUs it is given: ASCEND_RT_VISIBLE_DEVICES and trainer.n_gpus_per_node "
            "agree, and no process of an earlier run still holds an NPU (npu-smi info lists them)",
            "the CANN in the environment must match the host's driver (`verl-setup doctor` compares "
            "the toolkit with the row); on several nodes set HCCL_IF_IP / HCCL_SOCKET_IFNAME to the "
            "interface the nodes reach each other on",
        ),
        facts=facts,
    )


def hccl_timeout(hits: Sequence[Hit]) -> LogFinding:
    """EI0006: a rank waited for a peer past HCCL's connect timeout (a symptom of that peer)."""
    return LogFinding(
        cls="hccl-timeout",
        tier=1,
        summary="HCCL timed out waiting for another rank (EI0006): that rank was stuck or had failed",
        evidence=evidence_of(hits),
        remedy=(
            "look for the first failure on the other ranks: the rank that stopped is the cause, this "
            "one only waited for it",
            "if a rank is only slow (a long first step, loading a model), raise HCCL_CONNECT_TIMEOUT "
            "(120 s by default) on every rank, exported before `ray start` so workers inherit it",
        ),
    )


def npu_oom(hits: Sequence[Hit]) -> LogFinding:
    """torch_npu's allocator ran out of NPU memory (rollout or training)."""
    facts: dict[str, str] = {}
    for hit in hits:
        if m := _OOM.search(hit.text):
            facts = {k: v for k, v in m.groupdict().items() if v}
            break
    figures = (
        f": asked {facts['asked']} on NPU {facts['npu']} of {facts['total']}, {facts['free']} free"
        if len(facts) == 4
        else ""
    )
    return LogFinding(
        cls="npu-oom",
        tier=0,
        summary=f"the NPU ran out of memory{figures}",
        evidence=evidence_of(hits),
        remedy=(
            "rollout: lower actor_rollout_ref.rollout.gpu_memory_utilization (vllm-ascend takes that share "
            "of every NPU for weights and KV cache) or raise its tensor_model_parallel_size",
            "training: lower ppo_micro_batch_size_per_gpu, or offload params/optimizer "
            "(actor_rollout_ref.actor.fsdp_config.param_offload / optimizer_offload)",
            "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True reduces fragmentation "
            "(vllm-ascend's guides set it)",
        ),
        facts=facts,
    )


def rccl(hits: Sequence[Hit]) -> LogFinding:
    """RCCL (ROCm's NCCL) failed: its WARN line names the failing call."""
    what = next((m["what"].strip() for h in hits if (m := _RCCL.search(h.text))), "")
    return LogFinding(
        cls="rccl",
        tier=0,
        summary=f"RCCL failed{': ' + what[:160] if what else ''}",
        evidence=evidence_of(hits),
        remedy=(
            "rerun with NCCL_DEBUG=INFO (RCCL reads NCCL's variables) and read the first WARN of each rank",
            "every process must see the same GPUs: HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES agree with "
            "trainer.n_gpus_per_node; inside containers pass /dev/kfd and /dev/dri",
            "peer-to-peer transport failures: NCCL_P2P_DISABLE=1 isolates them (slower; verl's own triage "
            "uses it for init deadlocks)",
        ),
        facts={"warn": what[:160]} if what else {},
    )


_CANN_LIB = re.compile(
    r"(?P<lib>lib(?:hccl|ascendcl|acl_op_compiler|ge_runner|runtime)\S*\.so)\S*: cannot open shared object"
)


def cann_missing(hits: Sequence[Hit]) -> LogFinding | None:
    """An import that failed because CANN's libraries are not loadable (set_env.sh not sourced, or no
    CANN at all); None for any other import error. torch loads torch_npu at import, so even
    `import torch` fails this way (recorded: tests/fixtures/diagnose/SOURCES.md)."""
    lib = next((m["lib"] for h in hits if (m := _CANN_LIB.search(h.text))), None)
    if lib is None:
        return None
    return LogFinding(
        cls="import-error",
        tier=0,
        summary=f"CANN's {lib} cannot be loaded: torch_npu (which torch loads at import) needs CANN",
        evidence=evidence_of(hits),
        remedy=(
            "source /usr/local/Ascend/ascend-toolkit/set_env.sh (CANN's environment) in the shell and "
            "before `ray start`, so every worker has it; `verl-setup doctor --check accelerator` checks it",
            "no CANN on this machine: install the CANN version the row names (`verl-setup plan --explain`), "
            "or set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to use torch here without the NPU",
        ),
        facts={"library": lib},
    )


EXPLAINERS: dict[str, Callable[[Sequence[Hit]], LogFinding]] = {
    "hccl-init": hccl_init,
    "hccl-timeout": hccl_timeout,
    "npu-oom": npu_oom,
    "rccl": rccl,
}

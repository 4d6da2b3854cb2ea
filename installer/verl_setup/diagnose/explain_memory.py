"""Memory classes: Ray's memory monitor, the kernel's or a cgroup's OOM killer, CUDA OOM (trainer or
rollout) and an engine without room for its KV cache; each with the figures the log printed."""

from __future__ import annotations

import re
from collections.abc import Sequence

from verl_setup.diagnose.finding import LogFinding, evidence_of, near
from verl_setup.diagnose.launch import launch_values
from verl_setup.diagnose.oom_fragments import fragmentation_remedy
from verl_setup.diagnose.oom_plan import plan_lines
from verl_setup.diagnose.scan import Hit

_RAY_TASK = re.compile(
    r"Memory on the node \(IP: (?P<ip>[\d.]+)[^)]*\) where the task(?: \((?P<task>[^)]*)\))? was running "
    r"was (?P<used>[\d.]+)GB / (?P<total>[\d.]+)GB \((?P<frac>[\d.]+)\), which exceeds the memory usage "
    r"threshold of (?P<thr>\d+(?:\.\d+)?)"
)
_RAY_OLD = re.compile(
    r"System memory low at node with IP (?P<ip>[\d.]+)\. Used memory \((?P<used>[\d.]+)GB\) / total "
    r"capacity \((?P<total>[\d.]+)GB\) \((?P<frac>[\d.]+)\) exceeds threshold (?P<thr>\d+(?:\.\d+)?)"
)
_RAY_SUMMARY = re.compile(
    r"(?P<n>\d+) Workers \(tasks / actors\) killed due to memory pressure \(OOM\).*?IP: (?P<ip>[\d.]+)"
)
_KV = re.compile(r"(?P<k>name|pid|memory used)=(?P<v>[^,)]+)")

HOST_MEMORY_REMEDY = (
    "each colocated worker (one per GPU) holds its own host copy of what it loads: if "
    "actor_rollout_ref.actor.fsdp_config.param_offload / optimizer_offload or "
    "actor_rollout_ref.ref.fsdp_config.param_offload are on, they park weights and optimizer state in "
    "host RAM; lower data.dataloader_num_workers, or run fewer workers per node (trainer.n_gpus_per_node)",
    "`verl-setup doctor --check memory -- <launch>` estimates the host memory of a launch before the "
    "next try",
)


def ray_memory(hits: Sequence[Hit]) -> LogFinding:
    """Ray's memory monitor: which worker, at what usage, against which threshold."""
    facts: dict[str, str] = {}
    for hit in hits:
        text = near(hit)
        m = _RAY_TASK.search(text) or _RAY_OLD.search(text)
        if m:
            facts.update({k: v for k, v in m.groupdict().items() if v and k != "task"})
            facts.update(
                {k.replace(" ", "_"): v.strip() for k, v in _KV.findall(m.groupdict().get("task") or "")}
            )
            break
        s = _RAY_SUMMARY.search(text)
        if s and "killed" not in facts:
            facts.update(killed=s["n"], ip=s["ip"])
    if "frac" in facts:
        who = facts.get("name", "a worker")
        pid = (
            f" (pid {facts['pid']}" + (f", {facts['memory_used']}" if "memory_used" in facts else "") + ")"
            if "pid" in facts
            else ""
        )
        summary = (
            f"Ray's memory monitor killed {who}{pid} on {facts['ip']}: the node used {facts['used']} of "
            f"{facts['total']} GB ({float(facts['frac']):.3f}), over Ray's threshold {facts['thr']}"
        )
    else:
        summary = (
            f"Ray's memory monitor killed {facts.get('killed', 'some')} worker(s) on "
            f"{facts.get('ip', 'a node')} (memory pressure); the log does not print the usage"
        )
    remedy = (
        *HOST_MEMORY_REMEDY,
        "Ray kills at RAY_memory_usage_threshold (default 0.95), read when `ray start` runs: raising it "
        "only hands the kill to the kernel's OOM killer",
    )
    return LogFinding(
        cls="ray-memory-monitor",
        tier=0,
        summary=summary,
        evidence=evidence_of(hits),
        remedy=remedy,
        facts=facts,
    )


_KILLED = re.compile(r"Killed process (?P<pid>\d+) \((?P<comm>[^)]*)\)(?:.*?anon-rss:(?P<rss>\d+)kB)?")
_SLURM = re.compile(r"Detected (?P<n>\d+) oom-kill event\(s\) in (?P<step>\S+?)\.? cgroup")
_EVENTS = re.compile(r"^oom_kill (?P<n>\d+)")


def kernel_oom(hits: Sequence[Hit]) -> LogFinding:
    """The kernel's OOM killer, a cgroup's limit, or Slurm's cgroup report."""
    facts: dict[str, str] = {}
    scope = "the kernel's OOM killer (host memory)"
    for hit in hits:
        if "Memory cgroup out of memory" in hit.text or "memory.events" in hit.path:
            scope = "the cgroup's memory limit (a container, a Kubernetes pod or a Slurm job)"
        if (m := _KILLED.search(hit.text)) and "pid" not in facts:
            facts.update(pid=m["pid"], process=m["comm"])
            if m["rss"]:
                facts["rss_gib"] = f"{int(m['rss']) / 1024**2:.1f}"
        if m2 := _SLURM.search(hit.text):
            scope = "Slurm's cgroup memory limit"
            facts.update(events=m2["n"], step=m2["step"])
        if m3 := _EVENTS.search(hit.text):
            facts["oom_kill"] = m3["n"]
    what = (
        f"{facts['process']} (pid {facts['pid']}"
        + (f", {facts['rss_gib']} GiB resident)" if "rss_gib" in facts else ")")
        if "pid" in facts
        else "a process"
    )
    if "step" in facts:
        what = f"{facts['events']} process(es) of {facts['step']}"
    elif "oom_kill" in facts and "pid" not in facts:
        what = f"{facts['oom_kill']} process(es) (memory.events oom_kill)"
    remedy = (
        "raise the memory limit the run gets (the pod's resources.limits.memory, Slurm's --mem), "
        "or lower what the workers hold:",
        *HOST_MEMORY_REMEDY,
    )
    return LogFinding(
        cls="kernel-oom",
        tier=0,
        summary=f"{scope} killed {what}",
        evidence=evidence_of(hits),
        remedy=remedy,
        facts=facts,
    )


_NEW_OOM = re.compile(
    r"Tried to allocate (?P<want>[\d.]+ [KMG]iB)\. GPU (?P<gpu>\d+) has a total capacity of "
    r"(?P<total>[\d.]+ [KMG]iB) "
    r"of which (?P<free>[\d.]+ [KMG]iB) is free"
)
_OLD_OOM = re.compile(
    r"Tried to allocate (?P<want>[\d.]+ [KMG]iB) \(GPU (?P<gpu>\d+); "
    r"(?P<total>[\d.]+ [KMG]iB) total capacity;"
    r"(?: (?P<alloc>[\d.]+ [KMG]iB) already allocated;)?(?: (?P<free>[\d.]+ [KMG]iB) free;)?"
)
_BY_TORCH = re.compile(
    r"(?P<torch>[\d.]+ [KMG]iB) is allocated by PyTorch, and (?P<reserved>[\d.]+ [KMG]iB) is reserved"
)
_ROLLOUT = re.compile(
    r"vllm|sglang|rollout|generate_sequences|wake_up|cumem_allocator|kv_cache|EngineCore", re.I
)
_TRAINER = re.compile(
    r"dp_actor|update_actor|update_policy|compute_log_prob|megatron_actor|critic|backward|optimizer"
)


_OVERRIDE = re.compile(r"^\s*\+{0,2}[\w.]+=\S*\s*\\?$")


def side(hit: Hit) -> str:
    """'rollout' or 'trainer': the nearest frame above the error that names one, else 'unknown'."""
    if "cumem_allocator" in hit.text:
        return "rollout"  # vLLM's sleep-mode allocator
    for line in reversed((*hit.before, hit.text)):
        if _OVERRIDE.match(line):
            continue  # a launch's `critic.optim.lr=...` names no frame
        if _TRAINER.search(line):
            return "trainer"
        if _ROLLOUT.search(line):
            return "rollout"
    return "unknown"


def cuda_oom(hits: Sequence[Hit], launch: Sequence[Hit] = ()) -> LogFinding:
    """CUDA OOM: in the trainer or in the rollout engine, with the figures torch printed; with the
    run's launch line, the planner's estimate and what would have fit."""
    hit = hits[0]
    where = side(hit)
    facts: dict[str, str] = {"side": where}
    text = near(hit)
    if m := _NEW_OOM.search(text) or _OLD_OOM.search(text):
        facts.update({k: v for k, v in m.groupdict().items() if v})
    if b := _BY_TORCH.search(text):
        facts.update(b.groupdict())
    figures = (
        f": it asked for {facts['want']} on GPU {facts['gpu']} ({facts['total']} total"
        + (f", {facts['free']} free" if "free" in facts else "")
        + (f", {facts['torch']} held by PyTorch" if "torch" in facts else "")
        + (f", {facts['reserved']} reserved but unallocated" if "reserved" in facts else "")
        + ")"
        if "want" in facts
        else ""
    )
    trainer = (
        "lower actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (and "
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu / "
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu when it failed in compute_log_prob), "
        "or use actor_rollout_ref.actor.use_dynamic_bsz=True with a smaller ppo_max_token_len_per_gpu",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True; "
        "actor_rollout_ref.actor.fsdp_config.param_offload=True and optimizer_offload=True move weights "
        "and optimizer state to host RAM between steps",
        "a colocated rollout engine keeps actor_rollout_ref.rollout.gpu_memory_utilization of the GPU: "
        "lower it to leave the trainer more",
    )
    rollout = (
        "lower actor_rollout_ref.rollout.gpu_memory_utilization: the engine claims that share of the "
        "whole GPU while the trainer's weights are still resident",
        "raise actor_rollout_ref.rollout.tensor_model_parallel_size to split the weights, or lower "
        "actor_rollout_ref.rollout.max_num_batched_tokens / max_num_seqs",
        "keep actor_rollout_ref.rollout.free_cache_engine=True, and offload the actor "
        "(actor_rollout_ref.actor.fsdp_config.param_offload=True) so rollout has the GPU",
    )
    remedy: tuple[str, ...] = {"trainer": trainer, "rollout": rollout}.get(
        where, (*trainer[:1], *rollout[:1])
    )
    if launch:
        values = launch_values(launch[0])
        micro = values.get("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
        if micro == 1:
            facts["micro_batch"] = "1"
            remedy = tuple(r for r in remedy if not r.startswith("lower actor_rollout_ref.actor.ppo_micr"))
            remedy = (
                "ppo_micro_batch_size_per_gpu is already 1 in this launch: a smaller micro-batch cannot "
                "help; what the GPUs hold beside it must move (offload) or spread (more GPUs)",
                *remedy,
            )
        if values:
            planned, plan_facts = plan_lines(values, facts.get("total"))
            facts.update(plan_facts)
            remedy = (*planned, *remedy)
    fragments = fragmentation_remedy(facts)
    if fragments is not None:
        remedy = (fragments[0], *remedy) if fragments[1] else (*remedy, fragments[0])
    label = {"trainer": "in the trainer (FSDP/Megatron)", "rollout": "in the rollout engine"}.get(
        where, "(the traceback does not say whether trainer or rollout)"
    )
    return LogFinding(
        cls="cuda-oom", tier=0, summary=f"CUDA ran out of GPU memory {label}{figures}",
        evidence=evidence_of(hits), remedy=remedy, facts=facts,
    )  # fmt: skip


_KV_TOKENS = re.compile(
    r"max seq len \((?P<max_len>\d+)\) is larger than the maximum number of tokens that can be stored in KV "
    r"cache \((?P<kv_tokens>\d+)\)"
)
_KV_V1 = re.compile(
    r"max seq len \((?P<max_len>\d+)\), \((?P<needed>[\d.]+) GiB KV cache is needed, which is larger than "
    r"the available KV cache memory \((?P<available>[\d.]+) GiB\)(?:\. Based on the available memory, the "
    r"estimated maximum model length is (?P<fits>\d+))?"
)


def kv_cache(hits: Sequence[Hit]) -> LogFinding:
    """vLLM/SGLang found no room for the KV cache after loading the weights, or too little for one
    sequence of max_model_len tokens."""
    engine = "SGLang" if "mem-fraction-static" in hits[0].text else "vLLM"
    facts = {"engine": engine}
    for line in hits[0].before:
        if m := re.search(r"Model loading took ([\d.]+ ?GB)", line):
            facts["weights"] = m[1]
    for hit in hits:
        if m := _KV_TOKENS.search(hit.text) or _KV_V1.search(hit.text):
            facts.update({k: v for k, v in m.groupdict().items() if v})
            break
    if "kv_tokens" in facts:
        summary = (
            f"vLLM's KV cache holds {facts['kv_tokens']} tokens, fewer than one sequence of max_model_len="
            f"{facts['max_len']}"
        )
    elif "needed" in facts:
        summary = (
            f"vLLM needs {facts['needed']} GiB of KV cache for one sequence of {facts['max_len']} tokens and "
            f"has {facts['available']} GiB"
            + (f" (it fits {facts['fits']} tokens)" if "fits" in facts else "")
        )
    else:
        summary = f"{engine} found no GPU memory for its KV cache blocks after loading the model" + (
            f" (weights: {facts['weights']})" if "weights" in facts else ""
        )
    remedy = (
        "raise actor_rollout_ref.rollout.gpu_memory_utilization (the share of the GPU the engine may "
        "use, weights included) if the trainer leaves that room",
        "or raise actor_rollout_ref.rollout.tensor_model_parallel_size so each GPU holds less of the "
        "weights, or lower actor_rollout_ref.rollout.max_model_len (data.max_prompt_length + "
        "data.max_response_length)",
    )
    return LogFinding(
        cls="kv-cache-memory", tier=0, summary=summary, evidence=evidence_of(hits), remedy=remedy, facts=facts
    )

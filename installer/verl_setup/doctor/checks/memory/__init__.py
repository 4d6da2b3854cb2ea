"""Check `memory`: host RAM, the cgroup's memory limit and /dev/shm against the model's size.

Each colocated worker (one per GPU on the node) reads the Hugging Face weights into host memory
while it builds its model, and a checkpoint save gathers the optimizer state as well: fp32
master weights and two Adam moments, 12 bytes per parameter, 6x the bf16 weights, sharded over
the job's nodes. Both are estimates and say so; the sizes they start from are read, not guessed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from verl_setup.doctor.checks.memory.gpu import gpu_estimates
from verl_setup.doctor.probes.launch_command import hydra_value
from verl_setup.doctor.probes.model_files import read_model
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold
from verl_setup.host.resources import MEMINFO, cgroup_limit, meminfo

if TYPE_CHECKING:  # only annotations: diagnose imports this package without doctor's context
    from verl_setup.doctor.context import Context

ID = "memory"
GIB = 1024**3
SHM = Path("/dev/shm")  # noqa: S108  # read (statvfs), never written
SHM_FLOOR = 1 * GIB  # NCCL and the rollout engines share tensors through /dev/shm; Docker gives 64 MiB
OPTIMIZER_FACTOR = 6  # fp32 weights + Adam m and v (12 B/param) over bf16 weights (2 B/param)
RAY_KILL_AT = 0.95  # Ray's memory monitor kills a worker at this fraction (RAY_memory_usage_threshold)
# Offloaded state per node, in multiples of the bf16 weights, sharded over the nodes: FSDP keeps the
# actor's parameters in fp32 (fsdp_config.model_dtype, 4 B/param = 2x) and Adam's m and v in fp32
# (8 B/param = 4x).
PARAM_OFFLOAD_FACTOR = 2
OPTIMIZER_OFFLOAD_FACTOR = 4


def check_memory(ctx: Context) -> CheckResult:
    """RAM, cgroup limit and /dev/shm vs the model x colocated workers and a checkpoint save."""
    evidence: list[Evidence] = []
    findings: list[Finding] = []
    ram, available = meminfo()
    evidence.append(
        Evidence(name="RAM", value=f"{_gib(ram)} total, {_gib(available)} available", source=str(MEMINFO))
    )
    limit, where = cgroup_limit()
    usable = ram
    if limit is not None:
        evidence.append(Evidence(name="cgroup limit", value=_gib(limit), source=where))
        usable = min(ram, limit)
    model, model_source = _model_bytes(ctx)
    evidence.append(Evidence(name="model", value=_gib(model), source=model_source))
    workers, nnodes, workers_source = _workers(ctx)
    evidence.append(Evidence(name="workers per node", value=str(workers), source=workers_source))
    copies, copies_why = _loading_copies(ctx, workers)
    load = model * copies
    offload, offload_why = _offloaded(ctx, model, nnodes)
    save = model * OPTIMIZER_FACTOR // nnodes + model
    evidence.append(
        Evidence(
            name="estimates",
            value=f"loading {_gib(load)} (model x {copies}: {copies_why}); offloaded state {_gib(offload)} "
            f"({offload_why}); checkpoint save {_gib(save)} (optimizer state {OPTIMIZER_FACTOR}x the model "
            f"over {nnodes} node(s), plus one full copy); compared with {RAY_KILL_AT} of the memory, where "
            "Ray's memory monitor kills",
            source="estimates: verl 0.9.1 transformer_impl.py:266 loads the HF weights on CPU in the "
            "first rank of the FSDP mesh only, unless the model ties its embeddings; Adam is 12 B/param",
        )
    )
    load += offload  # offloaded state stays resident beside whatever loads next
    usable = int(usable * RAY_KILL_AT)
    limit_name = "the cgroup limit" if limit is not None and limit < ram else "host RAM"
    guessed = ctx.options.model_size is None and model_source == ctx.model_size_gib[1]
    if guessed and ctx.launch is None:
        # Neither a model nor a launch: the default size is no evidence to warn on.
        findings.append(
            Finding(status="pass", message="no model given (--model-size or a launch): sizes not compared")
        )
        return fold(ID, findings + _shm(evidence), evidence, ok="")
    if load > usable:
        findings.append(
            Finding(
                status="warn" if guessed else "fail",
                message=f"{workers} colocated workers loading a {_gib(model)} model need about {_gib(load)} "
                f"(estimate), more than {RAY_KILL_AT} of {limit_name} ({_gib(usable)}): Ray's memory "
                "monitor or the kernel's OOM killer ends a worker, and Ray reports it as a dead actor",
                remedy="use fewer GPUs per node, a node (or container limit) with more memory, or "
                "parameter offload (actor_rollout_ref.actor.fsdp_config.param_offload=True)"
                + ("; give the real size with --model-size or a local model.path" if guessed else ""),
            )
        )
    elif load > available:
        findings.append(
            Finding(
                status="warn",
                message=f"loading needs about {_gib(load)}, only {_gib(available)} is available now",
                remedy="stop what holds the memory (`ps aux --sort=-rss | head`) before the launch",
            )
        )
    if save > usable:
        findings.append(
            Finding(
                status="warn",
                message=f"a checkpoint save needs about {_gib(save)} of host memory, more than "
                f"{limit_name} ({_gib(usable)}): saves may be OOM-killed",
                remedy="save less often, leave 'optimizer' out of "
                "actor_rollout_ref.actor.checkpoint.save_contents, or use nodes with more memory",
            )
        )
    findings += _shm(evidence)
    findings += gpu_estimates(ctx, evidence)
    return fold(ID, findings, evidence, ok=f"{_gib(usable)} of memory covers loading and saving")


def _shm(evidence: list[Evidence]) -> list[Finding]:
    try:
        stat = os.statvfs(SHM)
    except OSError as exc:
        return [Finding(status="warn", message=f"cannot read {SHM}: {exc}")]
    size, free = stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize
    evidence.append(Evidence(name="shm", value=f"{_gib(size)} ({_gib(free)} free)", source=f"statvfs {SHM}"))
    if free >= SHM_FLOOR:
        return []
    return [
        Finding(
            status="warn",
            message=f"{SHM} has {_gib(free)} free: NCCL fails with 'Error while creating shared memory "
            "segment' and the rollout engines' shared tensors fail below about 1 GiB",
            remedy="give the container more: docker run --shm-size=16g (or --ipc=host); in Kubernetes "
            "mount an emptyDir with medium: Memory at /dev/shm",
        )
    ]


def _model_bytes(ctx: Context) -> tuple[int, str]:
    """The weights' size: the local model folder the launch names, else --model-size or the default."""
    given = ctx.launch.override("actor_rollout_ref.model.path") if ctx.launch else None
    if given is not None and given.value and ctx.options.model_size is None:
        model = read_model(Path(str(hydra_value(given.value))).expanduser())
        if model is not None and model.weight_bytes:
            return model.weight_bytes, f"{model.path}: {model.weight_source}"
    gib, source = ctx.model_size_gib
    return int(gib * GIB), source


def _loading_copies(ctx: Context, workers: int) -> tuple[int, str]:
    """How many full copies of the weights one node holds while the model loads."""
    given = ctx.launch.override("actor_rollout_ref.model.path") if ctx.launch else None
    model = read_model(Path(str(hydra_value(given.value))).expanduser()) if given and given.value else None
    if model is not None and model.config.get("tie_word_embeddings") is False:
        return 1, "rank 0 only: tie_word_embeddings=false, the other ranks start on meta tensors"
    why = "tie_word_embeddings=true" if model is not None else "the model's config is not read"
    return workers, f"every one of {workers} workers ({why})"


def _offloaded(ctx: Context, model: int, nnodes: int) -> tuple[int, str]:
    """Host memory per node that param_offload / optimizer_offload keep (sharded over the nodes)."""
    factor, parts = 0, []
    for key, times in (
        ("param_offload", PARAM_OFFLOAD_FACTOR),
        ("optimizer_offload", OPTIMIZER_OFFLOAD_FACTOR),
    ):
        given = ctx.launch.override(f"actor_rollout_ref.actor.fsdp_config.{key}") if ctx.launch else None
        if given is not None and hydra_value(given.value or "") is True:
            factor += times
            parts.append(f"{key} {times}x")
    if not parts:
        return 0, "no param_offload or optimizer_offload"
    return model * factor // nnodes, f"{' + '.join(parts)} the model over {nnodes} node(s)"


def _workers(ctx: Context) -> tuple[int, int, str]:
    """Workers colocated per node and the node count: from the launch, else this host's GPUs."""
    if ctx.launch is not None:
        per = ctx.launch.override("trainer.n_gpus_per_node")
        nodes = ctx.launch.override("trainer.nnodes")
        per_v = hydra_value(per.value) if per and per.value else 8
        nodes_v = hydra_value(nodes.value) if nodes and nodes.value else 1
        if isinstance(per_v, int) and isinstance(nodes_v, int) and per_v > 0 and nodes_v > 0:
            return per_v, nodes_v, "launch trainer.n_gpus_per_node / trainer.nnodes (verl defaults 8 / 1)"
    gpus = len(ctx.facts.gpus)
    return max(1, gpus), 1, f"{gpus} GPU(s) on this host" if gpus else "no GPU here: one worker"


def _gib(size: int) -> str:
    return f"{size / GIB:.1f} GiB" if size >= GIB // 10 else f"{size / 2**20:.0f} MiB"

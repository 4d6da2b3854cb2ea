"""Check `gpu-memory`: free memory per GPU against the rollout engine's gpu_memory_utilization, and
the processes holding it. With vLLM >= 0.7 the setting is a share of *total* memory for the whole
vLLM instance, and vLLM refuses to start when less than that is free. Nothing is ever killed."""

from __future__ import annotations

from typing import Any

from packaging.version import InvalidVersion, Version

from verl_setup.doctor.context import Context
from verl_setup.doctor.probes.launch_command import Resolver, hydra_value
from verl_setup.doctor.probes.verl_config import MISSING
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold, skip
from verl_setup.host.facts import Gpu
from verl_setup.util.vocab import ROLLOUT_ENGINES

ID = "gpu-memory"
KEY = "actor_rollout_ref.rollout.gpu_memory_utilization"
VERL_DEFAULT = 0.5  # rollout.yaml default in every release
HELD_WARN_MIB = 1024


def check_gpu_memory(ctx: Context) -> CheckResult:
    """Per GPU: free vs utilization x total (vLLM >= 0.7), and who holds the rest."""
    if not ctx.facts.gpus:
        return skip(ID, "no GPUs on this host (none reported by NVML or nvidia-smi): no memory to check")
    gpus = visible(ctx.facts.gpus, ctx.env.get("CUDA_VISIBLE_DEVICES"))
    util, util_source = utilization(ctx)
    engine, version, engine_source = _engine(ctx)
    evidence = [
        Evidence(name="gpu_memory_utilization", value=f"{util:g}", source=util_source),
        Evidence(name="engine", value=f"{engine} {version or ''}".strip(), source=engine_source),
    ]
    total_share = engine == "vllm" and _at_least(version, "0.7")
    findings = []
    for gpu in gpus:
        if gpu.memory_total_mib is None or gpu.memory_free_mib is None:
            evidence.append(Evidence(name=f"GPU {gpu.index}", value="memory not reported", source=gpu.source))
            continue
        total, free = gpu.memory_total_mib, gpu.memory_free_mib
        held = ", ".join(
            f"PID {p.pid} {p.name or '?'} {p.used_mib if p.used_mib is not None else '?'} MiB"
            for p in gpu.processes
        )
        evidence.append(
            Evidence(
                name=f"GPU {gpu.index} {gpu.name}",
                value=f"{free} of {total} MiB free" + (f"; held by {held}" if held else ""),
                source=gpu.source,
            )
        )
        pids = " ".join(str(p.pid) for p in gpu.processes)
        want = util * total
        if free < want:
            findings.append(
                Finding(
                    status="fail" if engine in ROLLOUT_ENGINES else "warn",
                    message=f"GPU {gpu.index}: {free} MiB free, but gpu_memory_utilization={util:g} asks "
                    f"for {want:.0f} of {total} MiB"
                    + (
                        " (vLLM: 'Free memory on device ... is less than desired GPU memory utilization')"
                        if total_share
                        else ""
                    ),
                    remedy=(
                        f"stop what holds the memory (PIDs {pids}; doctor kills nothing), or " if pids else ""
                    )
                    + f"lower {KEY} to <= {free / total:.2f}",
                )
            )
        elif sum(p.used_mib or 0 for p in gpu.processes) >= HELD_WARN_MIB:
            findings.append(
                Finding(
                    status="warn",
                    message=f"GPU {gpu.index}: other processes hold memory ({held}); vLLM fits now, "
                    "training beside them may run out",
                    remedy=f"stop PIDs {pids} before training if they are stale (doctor kills nothing)",
                )
            )
    if len(evidence) == 2:
        return skip(ID, "the GPUs report no memory figures", evidence)
    return fold(ID, findings, evidence, ok=f"every GPU has {util:g} of its memory free")


def visible(gpus: tuple[Gpu, ...], mask: str | None) -> tuple[Gpu, ...]:
    """The GPUs CUDA_VISIBLE_DEVICES leaves (indices or UUIDs); all when unset."""
    if mask is None or not mask.strip():
        return gpus
    wanted = [m.strip() for m in mask.split(",") if m.strip()]
    return tuple(
        g for g in gpus if str(g.index) in wanted or (g.uuid and any(g.uuid.startswith(w) for w in wanted))
    )


def utilization(ctx: Context) -> tuple[float, str]:
    """The launch command's value, else the installed verl's default, else verl's documented one."""
    config, _ = ctx.verl_config
    if ctx.launch is not None and config is not None:
        value, source = Resolver(ctx.launch, config, ctx.env).value(KEY)
    elif ctx.launch is not None and ctx.launch.override(KEY) is not None:
        given = ctx.launch.override(KEY)
        value = hydra_value(given.value or "") if given else MISSING
        source = f"launch command {given.text}" if given else ""
    elif config is not None:
        value, source = config.get(KEY), f"verl {config.version} default ({config.source.name})"
    else:
        value, source = MISSING, ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value), source
    return VERL_DEFAULT, "verl's default (rollout.yaml); no launch command or installed verl"


def _engine(ctx: Context) -> tuple[str, str | None, str]:
    target, _ = ctx.target
    dists: dict[str, Any] = dict(target.dists) if target else {}
    name = None
    if ctx.launch is not None:
        given = ctx.launch.override("actor_rollout_ref.rollout.name")
        name = given.value if given else None
    if name is None:
        name = next((e for e in ROLLOUT_ENGINES if e in dists), None)
    if name is not None:
        return name, dists.get(name), "installed" if name in dists else "launch command"
    row, how = ctx.row
    if row is not None:
        return row.engine.name, row.engine.version, f"row {row.id} ({how})"
    return "unknown", None, "no engine installed or planned"


def _at_least(version: str | None, floor: str) -> bool:
    """True for unknown versions: every current verl row uses vLLM >= 0.7."""
    if version is None:
        return True
    try:
        return Version(version) >= Version(floor)
    except InvalidVersion:
        return True

"""Check `ray` without a cluster: the private Ray that verl's main_ppo starts on this machine.

Always (cheap, no Ray started): the CPUs the affinity mask and cgroup allow against what Ray will
count, the temp dir's free space, proxies gRPC would use for 127.0.0.1, GPUs for the launch and
verl's CPUs per GPU bundle. With `--check ray` named: a real throwaway Ray with the launch's own
ray_init settings, one bundle and one actor per requested GPU, under a hard timeout.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from verl_setup.doctor.checks.gpu_memory import visible
from verl_setup.doctor.checks.ray_demand import findings as demand_findings
from verl_setup.doctor.context import Context
from verl_setup.doctor.probes.ray_local import (
    cpus_per_bundle,
    proxy_without_bypass,
    start_local_ray,
    temp_dir,
)
from verl_setup.doctor.probes.working_dir import find_working_dir, package_size, upload_limit
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold
from verl_setup.host.resources import cpu_limit

ID = "ray"
Uploads = tuple[list[Finding], list[Evidence]]
GIB = 1024**3
DISK_FULL = 0.95  # Ray's local_fs_capacity_threshold: above it the node refuses new objects
NUM_CPUS_KEYS = ("ray_kwargs.ray_init.num_cpus", "ray_init.num_cpus")  # verl >= 0.5, then older


def check_local_ray(ctx: Context, record: Path, uploads: Uploads = ([], [])) -> CheckResult:
    """Findings for the Ray that verl would start here (plus the working_dir upload's)."""
    evidence = [
        Evidence(
            name="cluster", value="none: verl starts a private Ray", source=f"no RAY_ADDRESS, no {record}"
        )
    ]
    findings: list[Finding] = []
    key, given = _num_cpus(ctx)
    per_node = ctx.launch_int("trainer.n_gpus_per_node", 8) if ctx.launch else None
    nnodes = ctx.launch_int("trainer.nnodes", 1) if ctx.launch else None
    bundle = _bundle(ctx)
    live = _live(ctx, given, per_node or 0, bundle[0] if bundle else 1)
    limit = cpu_limit()
    counted = given if given is not None else int(live.get("ray_counts_cpus") or limit.online)
    evidence.append(
        Evidence(
            name="CPUs",
            value=f"{limit.online} online, affinity allows {limit.affinity}"
            + (f", cgroup quota {limit.quota:g}" if limit.quota is not None else ""),
            source="os.cpu_count(), sched_getaffinity"
            + (f", {limit.quota_source}" if limit.quota_source else ""),
        )
    )
    evidence.append(
        Evidence(
            name="Ray counts",
            value=f"{counted} CPUs",
            source=f"launch {key}"
            if given is not None
            else (
                "Ray's get_num_cpus() in the target env"
                if "ray_counts_cpus" in live
                else "os.cpu_count() (Ray's rule outside containers)"
            ),
        )
    )
    allowed = int(limit.allowed)
    quota = "" if limit.quota is None else f", cgroup quota {limit.quota:g}"
    if counted > limit.allowed:
        findings.append(
            Finding(
                status="warn",
                message=f"Ray counts {counted} CPUs but this process may use {limit.allowed:g} "
                f"(affinity mask {limit.affinity}{quota}): Ray starts more workers than can run, "
                "and on Slurm the raylet's registration times out",
                remedy=f"pass {key}={max(1, allowed)} in the launch command",
            )
        )
    findings += _space(ctx, evidence)
    proxy = proxy_without_bypass(ctx.env, "127.0.0.1")
    if proxy:
        findings.append(
            Finding(
                status="warn",
                message=f"{proxy} is set and no_proxy does not cover 127.0.0.1: gRPC sends Ray's own "
                "traffic to the proxy, and ray.init() hangs",
                remedy="export no_proxy=127.0.0.1,localhost (plus the head's address on a cluster)",
            )
        )
    if per_node is not None and nnodes is not None:
        findings += _gpus_here(ctx, per_node, nnodes, evidence)
        if bundle is not None:
            findings += _bundles(per_node, bundle, counted, key, evidence)
        findings += demand_findings(
            ctx,
            counted,
            key=key,
            gpus=per_node * nnodes,
            per_bundle=bundle[0] if bundle else 1,
            evidence=evidence,
        )
    findings += _live_findings(live, evidence)
    findings += uploads[0]
    evidence += uploads[1]
    return fold(
        ID, findings, evidence, ok="a private Ray here has the CPUs, space and GPUs the launch asks for"
    )


def _num_cpus(ctx: Context) -> tuple[str, int | None]:
    """The ray_init.num_cpus key of the installed verl, and its value in the launch."""
    config, _ = ctx.verl_config
    key = next((k for k in NUM_CPUS_KEYS if config is not None and config.has(k)), NUM_CPUS_KEYS[0])
    if ctx.launch is None:
        return key, None
    value = next((ctx.launch_int(k, 0) for k in NUM_CPUS_KEYS if ctx.launch.override(k)), None)
    return key, value if value else None


def _bundle(ctx: Context) -> tuple[int, str] | None:
    target, _ = ctx.target
    if target is None or "verl" not in target.locations:
        return None
    return cpus_per_bundle(Path(target.locations["verl"]))


def _live(ctx: Context, num_cpus: int | None, gpus: int, per_bundle: int) -> dict[str, Any]:
    """The throwaway Ray, only when `ray` was asked for by name and the env has Ray."""
    target, _ = ctx.target
    if ID not in ctx.options.checks or target is None or "ray" not in target.dists:
        return {}
    env = {k: v for k, v in ctx.env.items() if k != "RAY_ADDRESS"}
    env.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # a private Ray stays on loopback
    return dict(
        start_local_ray(target.python, env, num_cpus=num_cpus, gpus=gpus, per_bundle=per_bundle), ran=True
    )


def _space(ctx: Context, evidence: list[Evidence]) -> list[Finding]:
    root = temp_dir(ctx.env)
    try:
        stat = os.statvfs(root)
    except OSError as exc:
        return [Finding(status="fail", message=f"Ray's temp dir {root} is unusable: {exc}")]
    total, free = stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize
    used = 1 - free / total if total else 1.0
    evidence.append(
        Evidence(
            name="temp dir",
            value=f"{root}: {free / GIB:.2f} GiB free of {total / GIB:.2f} GiB",
            source="statvfs (RAY_TMPDIR, TMPDIR, /tmp)",
        )
    )
    remedy = "point RAY_TMPDIR (or ray_init._temp_dir) at a disk with room, or free space there"
    if used >= DISK_FULL:
        return [
            Finding(
                status="fail",
                message=f"{root} is {used:.0%} full: Ray refuses new objects above {DISK_FULL:.0%} "
                "(local_fs_capacity_threshold) and its session logs stop",
                remedy=remedy,
            )
        ]
    if free < GIB:
        return [
            Finding(
                status="warn",
                message=f"{root} has {free / 2**20:.0f} MiB free: Ray's session logs and object spilling "
                "fill it within a run",
                remedy=remedy,
            )
        ]
    return []


def _gpus_here(ctx: Context, per_node: int, nnodes: int, evidence: list[Evidence]) -> list[Finding]:
    mask = ctx.env.get("CUDA_VISIBLE_DEVICES")
    have = len(visible(ctx.facts.gpus, mask))  # Ray counts only the GPUs this mask leaves
    need = per_node * nnodes
    masked = f" (CUDA_VISIBLE_DEVICES={mask})" if mask is not None and mask.strip() else ""
    evidence.append(
        Evidence(
            name="GPUs",
            value=f"{have} here{masked}, {need} wanted",
            source="detect, CUDA_VISIBLE_DEVICES; launch command",
        )
    )
    if nnodes > 1:
        return [
            Finding(
                status="fail",
                message=f"trainer.nnodes={nnodes} but no Ray cluster is given: a private Ray has one node",
                remedy="start the cluster (`verl-setup render ray` or `slurm`) and export RAY_ADDRESS",
            )
        ]
    if have < need:
        return [
            Finding(
                status="fail",
                message=f"Total available GPUs {have} is less than total desired GPUs {need}: verl stops "
                "before training",
                remedy=(
                    f"set trainer.n_gpus_per_node={have}"
                    + (", or widen CUDA_VISIBLE_DEVICES before `ray start`" if masked else "")
                    if have
                    else "run on a GPU node"
                ),
            )
        ]
    return []


def _bundles(
    per_node: int, bundle: tuple[int, str], counted: int, key: str, evidence: list[Evidence]
) -> list[Finding]:
    per_bundle, source = bundle
    need = per_node * per_bundle
    evidence.append(
        Evidence(
            name="CPUs per GPU bundle", value=f"{per_bundle} (x {per_node} GPUs = {need})", source=source
        )
    )
    if counted >= need:
        return []
    return [
        Finding(
            status="fail",
            message=f"verl asks for {per_node} bundles of {{CPU: {per_bundle}, GPU: 1}} = {need} CPUs "
            f"per node, Ray has {counted}: the placement group never becomes ready and the job waits forever",
            remedy=f"give Ray at least {need} CPUs ({key}={need}, if the cores exist), or use fewer GPUs",
        )
    ]


def _live_findings(live: dict[str, Any], evidence: list[Evidence]) -> list[Finding]:
    if not live:
        return []
    if live.get("init_error") or live.get("error"):
        error = live.get("init_error") or live.get("error")
        hung = live.get("hung") or "timed out" in str(error).lower() or "register" in str(error).lower()
        return [
            Finding(
                status="fail",
                message=("a private Ray did not register in time: " if hung else "a private Ray failed: ")
                + str(error),
                remedy="pass ray_init.num_cpus within the affinity/cgroup limit, give RAY_TMPDIR room, "
                "and run `ray stop` for stale local Rays",
            )
        ]
    evidence.append(
        Evidence(
            name="throwaway Ray",
            value=f"started in {live.get('init_seconds')}s with {live.get('cpus'):g} CPU, "
            f"{live.get('gpus'):g} GPU",
            source="ray.init() in the target env, fresh temp dir",
        )
    )
    placement = live.get("placement")
    if placement is None:
        return []
    evidence.append(
        Evidence(
            name="placement",
            value=f"{placement['bundles']} x {placement['per_bundle']}: "
            + (f"ready, {live.get('actors')} actor(s) placed" if placement["ready"] else "never ready"),
            source="placement_group(strategy=PACK), then one actor per bundle",
        )
    )
    if placement["ready"]:
        return []
    return [
        Finding(
            status="fail",
            message=f"a real placement group of {placement['bundles']} x {placement['per_bundle']} never "
            f"became ready on a Ray with {live.get('cpus'):g} CPU: verl's workers would wait forever",
            remedy="raise ray_init.num_cpus (within the cores this process may use) or lower n_gpus_per_node",
        )
    ]


def working_dir_findings(ctx: Context) -> Uploads:
    """The runtime_env working_dir the launch uploads, against Ray's upload limit."""
    wd = find_working_dir(ctx.launch, Path.cwd()) if ctx.launch else None
    if wd is None:
        return [], []
    if not wd.path.is_dir():
        missing = Finding(status="fail", message=f"working_dir {wd.path} ({wd.source}) is not a folder here")
        return [missing], []
    total, biggest = package_size(wd)
    limit, limit_source = upload_limit(ctx.env)
    top = ", ".join(f"{name} ({size / 2**20:.0f} MiB)" for size, name in biggest[:3])
    evidence = [
        Evidence(
            name="working_dir",
            value=f"{wd.path}: {total / 2**20:.0f} MiB after {len(wd.excludes)} exclude(s); biggest {top}",
            source=wd.source,
        )
    ]
    if total <= limit:
        return [], evidence
    return [
        Finding(
            status="fail",
            message=f"the working_dir upload is {total / 2**20:.0f} MiB, over Ray's {limit / 2**20:.0f} MiB "
            f"limit ({limit_source}): the job fails before it starts; biggest: {top}",
            remedy="add the weights and checkpoints to runtime_env excludes (*.safetensors, *.bin, "
            "checkpoints/; `verl-setup render ray` writes them), or move them out of the folder",
        )
    ], evidence


def auth_token_findings(ctx: Context) -> list[Finding]:
    """A ~/.ray/auth_token with RAY_AUTH_MODE unset: Ray 2.60's `ray start` turns token auth on."""
    home = Path(ctx.env.get("HOME") or Path.home())
    token = Path(ctx.env.get("RAY_AUTH_TOKEN_PATH") or home / ".ray/auth_token")
    if ctx.env.get("RAY_AUTH_MODE") or not token.is_file():
        return []
    return [
        Finding(
            status="warn",
            message=f"{token} exists and RAY_AUTH_MODE is unset: `ray start` here enables token "
            "authentication, and a client or node without that token fails with 'InvalidAuthToken: "
            "Authentication token is missing or incorrect'",
            remedy="give every node and client the same token (RAY_AUTH_TOKEN or the file), or export "
            "RAY_AUTH_MODE=disabled everywhere, or remove a token left by another run",
        )
    ]

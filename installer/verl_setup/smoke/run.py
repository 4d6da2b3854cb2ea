"""The smoke use case: make the inputs, start a private Ray, run main_ppo, check what it left.

Each stage is announced on the way (assets, ray start, workers, rollout start, first step, update,
checkpoint); a failure names the stage it stopped in and runs diagnose on the run's own logs (the
driver's output and the private Ray's session folder).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_setup.doctor.checks.ray_demand import Demand
from verl_setup.doctor.probes.ray_local import cpus_per_bundle
from verl_setup.scripts import script_path
from verl_setup.smoke import checks, launch
from verl_setup.smoke import ray as private_ray
from verl_setup.smoke.manifest import SmokeTarget
from verl_setup.smoke.memory import PeakSampler
from verl_setup.smoke.metrics import StepMetrics
from verl_setup.util.paths import tool_cache_dir
from verl_setup.util.vocab import SmokeStage

ASSETS_TIMEOUT_S = 300.0
STOP_GRACE_S = 10.0
RAY_TIMEOUT_S = 240.0
CPU_PROBS_DIFF = 1e-3  # measured 3e-5 on CPU (fp32 rollout, bf16-autocast actor)
GPU_PROBS_DIFF = 1e-2  # a bf16 engine's log-probs against FSDP's
ASSETS = script_path("smoke_assets")
Say = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class SmokeOptions:
    """One smoke run's choices (flags)."""

    work: Path
    model: Path | None = None
    gpus: int = 0
    ray_cpus: int = 16  # logical CPUs of the private Ray: verl's actors each hold or need one
    storage_units: int = 1
    timeout: float = 600.0
    max_probs_diff: float | None = None


@dataclass(kw_only=True)
class SmokeReport:
    """What a smoke run did and found."""

    target: SmokeTarget
    work: Path
    launch: launch.SmokeLaunch | None = None
    stages: list[dict[str, Any]] = field(default_factory=list)
    checks: list[checks.Check] = field(default_factory=list)
    failed_stage: SmokeStage | None = None
    failure: str | None = None
    diagnosis: dict[str, Any] | None = None
    peak: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    model: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failed_stage is None and bool(self.checks) and all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "prefix": str(self.target.prefix),
            "row": self.target.row,
            "verl": self.target.verl,
            "path": "gpu" if self.launch and "trainer.device=cuda" in self.launch.overrides else "cpu",
            "work": str(self.work),
            "model": self.model,
            "stages": self.stages,
            "failed_stage": self.failed_stage,
            "failure": self.failure,
            "checks": [c.to_json() for c in self.checks],
            "peak_memory": self.peak,
            "seconds": round(self.seconds, 1),
            "diagnosis": self.diagnosis,
            "launch": None if self.launch is None else {"argv": self.launch.argv, "env": self.launch.env},
        }


class Stages:
    """Times each stage and announces it (one progress line per stage)."""

    def __init__(self, report: SmokeReport, say: Say) -> None:
        self.report = report
        self.say = say
        self.start = time.monotonic()
        self.current: SmokeStage | None = None
        self.since = self.start

    def enter(self, stage: SmokeStage, what: str) -> None:
        self.close()
        self.current, self.since = stage, time.monotonic()
        self.say(f"smoke: {stage}: {what}")

    def close(self) -> None:
        if self.current is not None:
            self.report.stages.append(
                {"stage": self.current, "seconds": round(time.monotonic() - self.since, 1)}
            )
            self.current = None

    def fail(self, why: str) -> None:
        self.report.failed_stage = self.current
        self.report.failure = why
        self.close()


WHAT = {
    "workers": "main_ppo: config, TransferQueue, the actor's FSDP workers",
    "rollout start": "the rollout server loads the model",
    "first step": "rollout, reward, old log-prob, advantage, update, weight sync",
    "update": "the next steps",
    "checkpoint": "the last step's checkpoint, then exit",
}


def smoke(target: SmokeTarget, opts: SmokeOptions, env: Mapping[str, str], say: Say) -> SmokeReport:
    """Run it; the report says every stage's seconds and every check (never raises for a failed run)."""
    report = SmokeReport(target=target, work=opts.work)
    stages = Stages(report, say)
    opts.work.mkdir(parents=True, exist_ok=True)
    child_env = _child_env(env)
    running: private_ray.PrivateRay | None = None
    with PeakSampler(lambda: [os.getpid()], skip_roots=True) as sampler:
        try:
            stages.enter("assets", "a tiny model, its tokenizer and a parquet of prompts")
            model = _assets(target, opts, child_env)
            report.model = model
            settings = launch.Settings(
                python=target.python,
                verl=target.verl,
                work=opts.work,
                model=Path(model["model"]),
                gpus=opts.gpus,
                engine=target.engine,
                flash_attn=target.flash_attn,
                storage_units=opts.storage_units,
            )
            stages.enter("ray start", f"a private Ray ({opts.ray_cpus} CPUs, {max(1, opts.gpus)} GPU)")
            warning = ray_fit_warning(opts, _cpus_per_bundle(target))
            if warning:
                say(warning)
            running = private_ray.start(
                target.ray,
                _ray_root(opts.work, env),
                cpus=opts.ray_cpus,
                gpus=max(1, opts.gpus),
                env={**child_env, **launch.ray_environment(settings)},
                timeout=RAY_TIMEOUT_S,
                say=say,
            )
            report.launch = launch.build(settings, running.address)
            stages.enter("workers", WHAT["workers"])
            code, seconds, progress = _main_ppo(report.launch, child_env, opts, stages)
            stages.close()
            report.checks = _checks(progress, code, seconds, opts, Path(model["model"]))
            if not report.ok:
                failed = next(c for c in report.checks if not c.ok)
                report.failed_stage = progress.stage
                report.failure = f"{failed.name}: {failed.summary}"
        except (AssetsError, private_ray.RayStartError) as exc:
            stages.fail(str(exc))
        finally:
            if running is not None:
                private_ray.stop(running)
            sampler.sample()
        report.peak = {
            "rss_bytes": sampler.peak_rss,
            "pss_bytes": sampler.peak_pss,
            "processes": sampler.peak_processes,
        }
    report.seconds = time.monotonic() - stages.start
    if not report.ok:
        report.diagnosis = _diagnose(opts.work, env)
    return report


def ray_fit_warning(opts: SmokeOptions, per_bundle: int) -> str | None:
    """doctor's Ray-CPU count for this run's own settings: a warning (before launch) when the private
    Ray cannot place what main_ppo takes, since the run would then wait silently until --timeout."""
    d = Demand(
        storage_units=opts.storage_units,
        controller=1,
        bundles=max(1, opts.gpus) * per_bundle,
        agent_workers=1,
        reward_workers=1,
    )
    if opts.ray_cpus >= d.needed:
        return None
    units = opts.ray_cpus - d.controller - d.bundles - 1  # what fits beside the rest
    fewer = f" or --storage-units {units}" if 1 <= units < d.storage_units else ""
    return (
        f"warning: a Ray of {opts.ray_cpus} CPUs cannot place what this run takes ({d.needed}: "
        f"{d.words()}): main_ppo will wait until --timeout; fits: --ray-cpus {d.needed}{fewer}"
    )


def _cpus_per_bundle(target: SmokeTarget) -> int:
    site = next(iter(sorted(target.prefix.glob("lib/python*/site-packages"))), None)
    found = cpus_per_bundle(site) if site is not None else None
    return found[0] if found else 1


def _ray_root(work: Path, env: Mapping[str, str]) -> Path:
    """A short folder for the private Ray, linked from work/ray: Ray's sockets live under its
    session folder and AF_UNIX paths stop at 107 bytes, which a deep --work (pytest's tmp_path)
    passes ("validate_socket_filename failed ... plasma_store")."""
    root = Path(env.get("RAY_TMPDIR") or env.get("TMPDIR") or tempfile.gettempdir())
    folder = Path(tempfile.mkdtemp(prefix="vss-", dir=root))
    link = work / "ray"
    if link.is_symlink() or link.exists():
        link.unlink() if link.is_symlink() else shutil.rmtree(link)
    link.symlink_to(folder, target_is_directory=True)
    return folder


def _child_env(env: Mapping[str, str]) -> dict[str, str]:
    """The caller's variables for the run's programs, less RAY_ADDRESS (never the user's Ray), with
    bytecode cached in verl-setup's cache folder: an env installed without compiled bytecode (uv's
    default) under PYTHONDONTWRITEBYTECODE compiles torch, verl and Ray from source in every one of
    the run's dozen processes; Ray's dashboard agent then misses the raylet's fixed 15 s wait on a
    busy host. The cache mirrors the env's paths (PYTHONPYCACHEPREFIX): the env is not written to."""
    child = {k: v for k, v in env.items() if k not in ("RAY_ADDRESS", "PYTHONDONTWRITEBYTECODE")}
    child.setdefault("PYTHONPYCACHEPREFIX", str(tool_cache_dir(env) / "pycache"))
    return child


class AssetsError(RuntimeError):
    """The inputs could not be made in the target env."""


def _assets(target: SmokeTarget, opts: SmokeOptions, env: Mapping[str, str]) -> dict[str, Any]:
    argv = [str(target.python), str(ASSETS), str(opts.work)]
    if opts.model is not None:
        argv += ["--model", str(opts.model)]
    try:
        out = subprocess.run(  # the target env's interpreter, our script, by path
            argv, capture_output=True, env=dict(env), timeout=ASSETS_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise AssetsError(f"make_assets.py: no answer within {ASSETS_TIMEOUT_S:g}s") from exc
    (opts.work / "assets.log").write_bytes(out.stdout + out.stderr)
    lines = out.stdout.decode(errors="replace").strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = (out.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise AssetsError(f"make_assets.py exited {out.returncode}: {tail}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _main_ppo(
    plan: launch.SmokeLaunch, env: Mapping[str, str], opts: SmokeOptions, stages: Stages
) -> tuple[int | None, float, StepMetrics]:
    """Run main_ppo in a session of its own (its Ray's processes and workers included), its output
    to main_ppo.log, announcing each stage its output shows; the session is killed at the end, so
    nothing it started outlives the run (by its id: never `ray stop`)."""
    progress = StepMetrics(steps=launch.STEPS)
    log = opts.work / "main_ppo.log"
    start = time.monotonic()
    timed_out = threading.Event()
    with log.open("wb") as sink:
        process = subprocess.Popen(  # the target env's interpreter, by path
            plan.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**env, **plan.env},
            cwd=opts.work,
            start_new_session=True,
        )
        timer = threading.Timer(opts.timeout, _expire, (process, timed_out))
        timer.start()
        try:
            if process.stdout is None:  # stdout=PIPE always gives one
                raise RuntimeError("main_ppo has no stdout pipe")
            for raw in process.stdout:
                sink.write(raw)
                sink.flush()
                new = progress.feed(raw.decode(errors="replace"))
                if new is not None:
                    stages.enter(new, WHAT[new])
            code = process.wait()
        finally:
            timer.cancel()
            _end_session(process)
    return (None if timed_out.is_set() else code), time.monotonic() - start, progress


def _expire(process: subprocess.Popen[bytes], flag: threading.Event) -> None:
    flag.set()
    _end_session(process)


def _end_session(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to main_ppo's session (its driver, Ray and workers), SIGKILL after a grace period."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _alive_in(process.pid):
            time.sleep(0.2)


def _alive_in(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _checks(
    progress: StepMetrics, code: int | None, seconds: float, opts: SmokeOptions, model: Path
) -> list[checks.Check]:
    threshold = opts.max_probs_diff or (CPU_PROBS_DIFF if opts.gpus == 0 else GPU_PROBS_DIFF)
    actor = checks.checkpoint_dir(opts.work / "checkpoints", launch.STEPS)
    found = [
        checks.exit_check(code, seconds, opts.timeout),
        checks.losses_check(progress.metrics, launch.STEPS),
        checks.checkpoint_check(actor),
    ]
    if found[-1].ok:
        found.append(checks.weights_check(model, actor / "huggingface"))
    found.append(checks.sync_check(progress.metrics, launch.STEPS, threshold))
    return found


def _diagnose(work: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """diagnose on the run's own logs: the driver's output and the private Ray's session."""
    from verl_setup.diagnose.sources import gather  # noqa: PLC0415  # only a failed run needs it
    from verl_setup.diagnose.verdict import diagnose  # noqa: PLC0415

    paths = [p for p in (work / "main_ppo.log", work / "assets.log") if p.exists()]
    paths += sorted((work / "ray").glob("ray-start.*.log"))
    paths += [s for s in sorted((work / "ray").glob("try*/session_latest")) if s.exists()]
    result: dict[str, Any] = diagnose(gather(paths, env, system=False)).to_json()
    return result

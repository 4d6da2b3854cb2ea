"""The machine a plan is for: flags > VERL_SETUP_* environment > host file > detection (which
uv's UV_CUDA_DRIVER_VERSION and conda's CONDA_OVERRIDE_CUDA override, plan/anchors.py). Precedence
is applied here and only here; each value keeps the name of where it came from."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from verl_setup.errors import BadInputError, NoCompatibleRowError
from verl_setup.matrix.cuda import CudaRules
from verl_setup.plan import accelerator as accel
from verl_setup.plan.anchors import anchor_driver
from verl_setup.plan.host_driver import host_driver, jetson_message
from verl_setup.plan.request import Request
from verl_setup.plan.typed_names import arch_from_gpus, gpu_capability, typed_driver
from verl_setup.util.versions import DriverVersion, fmt, parse_count, parse_minor, parse_python, shown
from verl_setup.util.vocab import (
    BACKEND_NAMES,
    ENGINE_NAMES,
    POLICIES,
    PREFERENCES,
    BackendName,
    Policy,
    Prefer,
)

if TYPE_CHECKING:  # a plan from flags never reads a host, so never loads its classes
    from verl_setup.host.facts import HostFacts, PythonInterpreter

V = TypeVar("V")
ENGINES = ENGINE_NAMES
MAX_GPUS = 4096  # GPUs on one node; far more than any machine has
_GLIBC = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?")
_VERL_PREFIX = re.compile(r"[0-9]{1,4}(?:\.[0-9]{1,4}){0,3}")  # ASCII digits: "²".isdigit() is True


@dataclass(frozen=True)
class Fact(Generic[V]):
    """A value and where it came from ("flag --driver", "host file node.json (procfs)", ...)."""

    value: V
    source: str


@dataclass(frozen=True, kw_only=True)
class GpuSpec:
    """A GPU as selection sees it: a name (if known) and its compute capability."""

    name: str
    compute_capability: str


@dataclass(frozen=True, kw_only=True)
class Target:
    """Every fact selection uses, each with its source."""

    driver: Fact[DriverVersion | None]
    gpus: Fact[tuple[GpuSpec, ...]]
    gpu_count: Fact[int]
    python: Fact[tuple[int, ...] | None]
    glibc: Fact[str | None]
    arch: Fact[str | None]
    verl: Fact[str | None]
    engine: Fact[str | None]
    policy: Fact[Policy]
    backend: Fact[BackendName] = field(default=Fact("fsdp", "default"))
    prefer: Fact[Prefer] = field(default=Fact("whole", "default"))
    # The target's interpreters; `local` says they were detected on this very machine, so an
    # install can use them without detecting again (a host file's paths belong to another one).
    host_pythons: tuple[PythonInterpreter, ...] = field(default=())
    local: bool = False
    # CUDA toolkits on the target as (path, version): rendering points CUDA_HOME at a match.
    cuda_toolkits: tuple[tuple[str, str], ...] = field(default=())
    # An Ascend NPU or AMD GPU target (plan/accelerator.py); None on NVIDIA and CPU machines.
    accelerator: Fact[accel.AcceleratorTarget | None] = field(default=Fact(None, "none"))

    def facts_json(self) -> dict[str, Any]:
        """The facts as `{name: {value, source}}` for `plan --json`."""

        def plain(value: object) -> object:
            if isinstance(value, DriverVersion):
                return str(value)
            if isinstance(value, tuple) and value and isinstance(value[0], int):
                return fmt(value)
            if isinstance(value, tuple):
                return [{"name": g.name, "compute_capability": g.compute_capability} for g in value]
            if isinstance(value, accel.AcceleratorTarget):
                return {
                    "family": value.family,
                    "name": value.name,
                    "chip": value.chip,
                    "toolkit": value.toolkit,
                }
            return value

        names = (
            "driver",
            "gpus",
            "gpu_count",
            "python",
            "glibc",
            "arch",
            "verl",
            "engine",
            "backend",
            "policy",
            "accelerator",
            "prefer",
        )
        return {n: {"value": plain(getattr(self, n).value), "source": getattr(self, n).source} for n in names}


def from_env(given: Path | None, env: Mapping[str, str], name: str) -> Path | None:
    """A path flag, else the environment variable `name` (flag > env, stated once for paths)."""
    if given is not None:
        return given
    return Path(env[name]) if env.get(name) else None


def build_target(
    request: Request,
    *,
    env: Mapping[str, str],
    rules: CudaRules,
    detect: Callable[[], HostFacts],
    load_host: Callable[[Path], HostFacts],
) -> Target:
    """Merge flags, VERL_SETUP_* variables, a host file and (only if needed) live detection."""
    host, host_source = _host_for(request, env, detect, load_host)
    accelerator = Fact(*accel.target_fact(request.accelerator_asked, env, host, host_source))

    def pick(flag: str | None, flag_name: str, env_name: str) -> tuple[str | None, str]:
        if flag is not None:
            return flag, f"flag {flag_name}"
        if env.get(env_name):
            return env[env_name], f"env {env_name}"
        key = flag_name.removeprefix("--")
        if request.config.get(key):
            return request.config[key], f"{request.config_sources.get(key, request.config_source)} ({key})"
        return None, ""

    env_no_gpu = env.get("VERL_SETUP_NO_GPU", "").strip().lower() in {"1", "true", "yes"}
    driver_text, driver_source = pick(request.driver, "--driver", "VERL_SETUP_DRIVER")
    # uv's and conda's overrides stand in for detection; a host file is another machine's record.
    anchor = None if driver_text is not None or host_source != "detected" else anchor_driver(env, rules)
    anchor_no_gpu = anchor is not None and anchor[0] == "none"
    no_gpu = request.no_gpu or env_no_gpu or anchor_no_gpu
    no_gpu_source = (
        "flag --no-gpu"
        if request.no_gpu
        else "env VERL_SETUP_NO_GPU"
        if env_no_gpu
        else (anchor[1] if anchor else "")
    )
    if no_gpu:
        driver = Fact[DriverVersion | None](None, no_gpu_source)
    elif driver_text is not None:
        driver = Fact(*typed_driver(driver_text, driver_source, rules))
    elif anchor is not None and isinstance(anchor[0], DriverVersion):
        driver = Fact(anchor[0], anchor[1])
    elif host is not None and host.host_kind.kind == "jetson":
        raise NoCompatibleRowError(jetson_message(host, host_source))
    elif host is not None and host.nvidia is not None:
        driver = Fact(*host_driver(host, host_source, rules))
    else:
        driver = Fact(None, f"{host_source} (no NVIDIA driver)" if host else "not given")

    if accelerator.value is not None:  # Ascend/AMD names are no NVIDIA GPUs: never asked for --sm
        request = dataclasses.replace(request, gpus=accel.nvidia_names(request.gpus))
    gpus = _gpus(
        request,
        env=env,
        rules=rules,
        host=host,
        host_source=host_source,
        no_gpu=no_gpu_source if no_gpu else None,
    )
    count_text, count_source = pick(
        None if request.gpu_count is None else str(request.gpu_count),
        "--gpu-count",
        "VERL_SETUP_GPU_COUNT",
    )
    if count_text is not None:
        gpu_count = Fact(parse_count(count_text, "GPU count", MAX_GPUS), count_source)
    else:
        gpu_count = Fact(len(gpus.value), gpus.source)

    py_text, py_source = pick(request.python, "--python", "VERL_SETUP_PYTHON")
    python = Fact(parse_python(py_text) if py_text else None, py_source or "not requested")
    verl_text, verl_source = pick(request.verl, "--verl", "VERL_SETUP_VERL")
    if verl_text is not None and not _VERL_PREFIX.fullmatch(verl_text):
        raise BadInputError(f"bad verl version prefix {shown(verl_text)}: expected a form like 0.7 or 0.9.1")
    engine_text, engine_source = pick(request.engine, "--engine", "VERL_SETUP_ENGINE")
    if engine_text is not None and engine_text not in ENGINES:
        raise BadInputError(f"bad engine {shown(engine_text)}: expected one of {', '.join(ENGINES)}")
    policy_text, policy_source = pick(request.policy, "--policy", "VERL_SETUP_POLICY")
    policy: Fact[Policy] = _choice(policy_text, policy_source, POLICIES, "policy", "compat")
    prefer_text, prefer_source = pick(request.prefer, "--prefer", "VERL_SETUP_PREFER")
    prefer: Fact[Prefer] = _choice(prefer_text, prefer_source, PREFERENCES, "preference", "whole")
    backend_text, backend_source = pick(request.backend, "--backend", "VERL_SETUP_BACKEND")
    if backend_text is None and host is not None and host.backend:
        backend_text, backend_source = host.backend, f"{host_source} (backend)"
    backend: Fact[BackendName] = _choice(backend_text, backend_source, BACKEND_NAMES, "backend", "fsdp")

    return Target(
        driver=driver,
        gpus=gpus,
        gpu_count=gpu_count,
        python=python,
        glibc=_glibc(
            _os_fact(
                request.glibc,
                "--glibc",
                env,
                "VERL_SETUP_GLIBC",
                host=(host.os.glibc if host else None, host_source),
            )
        ),
        arch=_arch(
            _os_fact(
                request.arch,
                "--arch",
                env,
                "VERL_SETUP_ARCH",
                host=(host.os.arch if host else None, host_source),
            ),
            gpus,
        ),
        verl=Fact(verl_text, verl_source or "not requested"),
        engine=Fact(engine_text, engine_source or "not requested"),
        policy=policy,
        prefer=prefer,
        backend=backend,
        host_pythons=host.pythons if host else (),
        local=host_source == "detected",
        cuda_toolkits=tuple((t.path, t.version) for t in host.cuda_toolkits if t.version) if host else (),
        accelerator=accelerator,
    )


def _host_for(
    request: Request,
    env: Mapping[str, str],
    detect: Callable[[], HostFacts],
    load_host: Callable[[Path], HostFacts],
) -> tuple[HostFacts | None, str]:
    """The host file if given; no host when flags describe another machine; else detection."""
    host_file = from_env(request.host_file, env, "VERL_SETUP_HOST")
    if host_file is not None:
        return load_host(host_file), f"host file {host_file}"
    # Flags that describe a GPU node mean "plan for another machine": this machine's own
    # glibc, CPU and GPUs must not leak into that plan, so detection is skipped.
    flags = (request.driver, request.gpus, request.sm, request.npu, request.cann, request.rocm)
    names = ("DRIVER", "GPU", "SM", "NPU", "CANN", "ROCM")
    if any(flags) or any(env.get(f"VERL_SETUP_{n}") for n in names):
        return None, "not given"
    return detect(), "detected"


C = TypeVar("C", bound=str)


def _choice(text: str | None, source: str, choices: tuple[C, ...], what: str, default: C) -> Fact[C]:
    """One of a closed vocabulary, or the default; BadInputError naming the choices otherwise."""
    if text is None:
        return Fact(default, "default")
    for name in choices:
        if text == name:
            return Fact(name, source)
    raise BadInputError(f"bad {what} {shown(text)}: expected one of {', '.join(choices)}")


def _os_fact(
    flag: str | None, flag_name: str, env: Mapping[str, str], name: str, *, host: tuple[str | None, str]
) -> Fact[str | None]:
    """One OS fact: flag > env > host file (or detection)."""
    value, host_source = host
    if flag:
        return Fact(flag, f"flag {flag_name}")
    if env.get(name):
        return Fact(env[name], f"env {name}")
    if value is None:
        return Fact(None, f"not given (use {flag_name}, --host FILE or {name})")
    return Fact(value, f"{host_source} (uname, confstr)")


def _arch(fact: Fact[str | None], gpus: Fact[tuple[GpuSpec, ...]]) -> Fact[str | None]:
    """The arch given, else the one the GPUs imply (a Grace superchip is aarch64 only)."""
    return Fact(*arch_from_gpus(fact.value, fact.source, tuple(g.name for g in gpus.value)))


def _glibc(fact: Fact[str | None]) -> Fact[str | None]:
    """glibc is compared as numbers: only ASCII digits, a few of them ("2.35", "2.17.1")."""
    if fact.value is None:
        return fact
    if not _GLIBC.fullmatch(fact.value.strip()):
        raise BadInputError(
            f"bad glibc version {shown(fact.value)} ({fact.source}): expected a form like 2.35"
        )
    return Fact(fact.value.strip(), fact.source)


def _gpus(
    request: Request,
    *,
    env: Mapping[str, str],
    rules: CudaRules,
    host: HostFacts | None,
    host_source: str,
    no_gpu: str | None,
) -> Fact[tuple[GpuSpec, ...]]:
    if no_gpu:
        return Fact((), no_gpu)
    sm_text = request.sm or env.get("VERL_SETUP_SM") or None
    sm_source = "flag --sm" if request.sm else "env VERL_SETUP_SM"
    sm = None
    if sm_text:
        major, minor = parse_minor(sm_text, "compute capability")
        sm = f"{major}.{minor}"
    names: tuple[str, ...] = request.gpus
    source = "flag --gpu"
    if not names and env.get("VERL_SETUP_GPU"):
        names = tuple(n.strip() for n in env["VERL_SETUP_GPU"].split(",") if n.strip())
        source = "env VERL_SETUP_GPU"
    if names:
        specs = []
        for name in names:
            found = (sm, name) if sm else gpu_capability(name, rules.compute_capability)
            if found is None:
                raise BadInputError(f"unknown GPU {shown(name)}: give its compute capability with --sm X.Y")
            specs.append(GpuSpec(name=found[1], compute_capability=found[0]))
        return Fact(tuple(specs), source + (" + --sm" if sm else " (GPU table)"))
    if sm is not None:
        count = max(1, len(host.gpus) if host else 1)
        return Fact(
            tuple(GpuSpec(name=f"sm {sm}", compute_capability=sm) for _ in range(count)),
            sm_source,
        )
    if host is None:
        return Fact((), "not given")
    specs = []
    for gpu in host.gpus:
        cc = gpu.compute_capability or rules.compute_capability(gpu.name, gpu.pci_device_id)
        if cc is None:
            raise BadInputError(
                f"{host_source}: GPU {shown(gpu.name)} has no known compute capability; pass --sm X.Y"
            )
        specs.append(GpuSpec(name=gpu.name, compute_capability=cc))
    sources = sorted({g.source for g in host.gpus})
    return Fact(tuple(specs), f"{host_source} ({', '.join(sources) or 'no GPUs'})")

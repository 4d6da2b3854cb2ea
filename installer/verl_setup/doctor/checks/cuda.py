"""Check `cuda`: the driver against the CUDA of the installed torch (both policies), a newer
toolkit on PATH/CUDA_HOME, a libcudart shadowing the wheel's, forward-compat libraries.

Driver rules come from matrices/cuda.yaml (NVIDIA's tables), never from anecdotes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from verl_setup.doctor.context import Context
from verl_setup.doctor.probes.env import torch_cuda
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold, skip
from verl_setup.host.system import toolkit_version
from verl_setup.matrix.cuda import CudaRules
from verl_setup.util.versions import DriverVersion, parse_minor

ID = "cuda"
_SONAME = re.compile(r"^libcudart\.so\.(\d+)(?:\.(\d+)(?:\.\d+)?)?$")
_COMPAT = re.compile(r"^libcuda\.so\.(\d{3}\.\d+(?:\.\d+)?)$")


def check_cuda(ctx: Context) -> CheckResult:
    """Driver vs torch's CUDA, toolkit vs driver, LD_LIBRARY_PATH libcudart, forward compat."""
    driver = ctx.facts.nvidia
    if driver is None:
        toolkits = [
            Evidence(name="toolkit", value=f"{t.version} at {t.path}", source=t.source)
            for t in ctx.facts.cuda_toolkits
        ]
        return skip(
            ID,
            "no NVIDIA driver on this host (no kernel module, NVML or nvidia-smi): nothing runs CUDA here"
            + (" (a CUDA toolkit is installed, but nvcc is not a GPU)" if toolkits else ""),
            toolkits,
        )
    rules = ctx.matrix.cuda
    drv = DriverVersion.parse(driver.version)
    evidence = [Evidence(name="driver", value=str(drv), source=driver.source)]
    if driver.cuda:
        evidence.append(Evidence(name="driver CUDA", value=driver.cuda, source=str(driver.cuda_source)))
    cuda, how = _torch_cuda(ctx)
    evidence.append(Evidence(name="torch CUDA", value=str(cuda), source=how))
    findings = driver_vs_torch(rules, drv, cuda, how) if cuda else []
    findings += _toolkits(ctx, rules, drv, evidence)
    findings += _cudart(ctx, cuda, evidence)
    findings += _forward_compat(ctx, drv, evidence)
    return fold(ID, findings, evidence, ok=f"driver {drv}")


def _torch_cuda(ctx: Context) -> tuple[str | None, str]:
    target, _ = ctx.target
    if target is not None and "torch" in target.dists:
        cuda, source = torch_cuda(target.dists["torch"], target.requires.get("torch", ()))
        return cuda, f"torch {target.dists['torch']} in {target.prefix}: {source}"
    row, how = ctx.row
    if row is not None and row.torch.cuda:
        return row.torch.cuda, f"no torch installed; row {row.id} ({how}) installs torch {row.torch.version}"
    return None, "no torch installed and no row to plan from"


def driver_vs_torch(rules: CudaRules, drv: DriverVersion, cuda: str, how: str) -> list[Finding]:
    floor, full = rules.family_floor(cuda), rules.full_support(cuda)
    newest = rules.newest_cuda(drv)
    if floor is None or drv < floor:
        return [
            Finding(
                status="fail",
                message=f"driver {drv} cannot run CUDA {cuda} under either policy (the CUDA "
                f"{cuda.split('.', maxsplit=1)[0]}.x family needs >= {floor}): torch fails with 'CUDA driver "
                "version is insufficient for CUDA runtime version'",
                remedy=f"upgrade the driver to >= {full or floor}, or install a torch built for CUDA "
                f"<= {newest} (`verl-setup plan` picks one)",
            )
        ]
    if full is not None and drv < full:
        return [
            Finding(
                status="warn",
                message=f"driver {drv} runs CUDA {cuda} only by minor-version compatibility (policy "
                f"compat: allowed; policy strict: needs >= {full}); no JIT of newer PTX",
                remedy=f"upgrade the driver to >= {full} for full support",
            )
        ]
    return [
        Finding(
            status="pass",
            message=f"driver {drv} fully supports CUDA {cuda} ({how.split(':', maxsplit=1)[0]})",
        )
    ]


def _toolkits(ctx: Context, rules: CudaRules, drv: DriverVersion, evidence: list[Evidence]) -> list[Finding]:
    """A toolkit that JIT builds (flashinfer, vLLM, DeepGEMM) would use: nvcc on PATH, CUDA_HOME."""
    found: dict[str, tuple[str, str]] = {}
    for kit in ctx.facts.cuda_toolkits:
        if kit.on_path and kit.version:
            found[os.path.realpath(kit.path)] = (kit.version, f"nvcc on PATH ({kit.path})")
    if ctx.env.get("CUDA_HOME"):
        home = Path(ctx.env["CUDA_HOME"])
        version, source = toolkit_version(home.resolve())
        if version:
            found[os.path.realpath(home)] = (version, f"CUDA_HOME={home} ({source})")
    findings = []
    for version, where in found.values():
        evidence.append(Evidence(name="toolkit", value=version, source=where))
        short = ".".join(version.split(".")[:2])
        floor, full = rules.family_floor(short), rules.full_support(short)
        newest = rules.newest_cuda(drv)
        if floor is not None and drv < floor:
            findings.append(
                Finding(
                    status="fail",
                    message=f"CUDA toolkit {short} ({where}) needs driver >= {floor}, this one is {drv}: "
                    "kernels it JIT-builds (flashinfer, vLLM) fail to load",
                    remedy=f"point CUDA_HOME and PATH at a toolkit <= {newest}, or upgrade the driver",
                )
            )
        elif (
            full is not None
            and drv < full
            and newest
            and parse_minor(short, "CUDA") > parse_minor(newest, "CUDA")
        ):
            findings.append(
                Finding(
                    status="warn",
                    message=f"CUDA toolkit {short} ({where}) is newer than driver {drv} fully supports "
                    f"({newest}): PTX it emits cannot be JIT-compiled by this driver",
                    remedy=f"use a toolkit <= {newest} for JIT builds, or upgrade the driver to >= {full}",
                )
            )
    return findings


def _cudart(ctx: Context, cuda: str | None, evidence: list[Evidence]) -> list[Finding]:
    """LD_LIBRARY_PATH is searched before the wheels' RUNPATH: a libcudart there wins."""
    if cuda is None:
        return []
    major, minor = parse_minor(cuda, "CUDA")
    findings = []
    for folder in filter(None, ctx.env.get("LD_LIBRARY_PATH", "").split(os.pathsep)):
        for lib in sorted(Path(folder).glob(f"libcudart.so.{major}*")):
            version = _cudart_version(lib)
            evidence.append(
                Evidence(
                    name="libcudart",
                    value=f"{lib} (CUDA {'.'.join(map(str, version)) if version else 'version unknown'})",
                    source="LD_LIBRARY_PATH",
                )
            )
            if version is not None and version < (major, minor):
                findings.append(
                    Finding(
                        status="fail",
                        message=f"{lib} (CUDA {version[0]}.{version[1]}) on LD_LIBRARY_PATH shadows the "
                        f"CUDA {cuda} libcudart torch was built with",
                        remedy=f"remove {folder} from LD_LIBRARY_PATH (the wheels bring their own libcudart)",
                    )
                )
            break
    return findings


def _cudart_version(lib: Path) -> tuple[int, int] | None:
    """From the real file name (libcudart.so.12.4.127), else the toolkit the folder belongs to."""
    m = _SONAME.match(lib.resolve().name)
    if m and m[2] is not None:
        return int(m[1]), int(m[2])
    for home in (lib.parent.parent, lib.parent.parent.parent):
        version, _ = toolkit_version(home.resolve())
        if version:
            return parse_minor(".".join(version.split(".")[:2]), "CUDA")
    return None


def _forward_compat(ctx: Context, drv: DriverVersion, evidence: list[Evidence]) -> list[Finding]:
    """cuda-compat's libcuda.so.<driver> replaces the user-mode driver when it is on the path."""
    on_path = set(filter(None, ctx.env.get("LD_LIBRARY_PATH", "").split(os.pathsep)))
    folders = {str(p) for p in Path("/usr/local").glob("cuda*/compat")} | on_path
    findings = []
    for folder in sorted(folders):
        for lib in Path(folder).glob("libcuda.so.*"):
            m = _COMPAT.match(lib.name)
            if m is None:
                continue
            used = folder in on_path
            evidence.append(
                Evidence(
                    name="forward compat",
                    value=f"{lib} (driver {m[1]})",
                    source="on LD_LIBRARY_PATH" if used else "present, not on LD_LIBRARY_PATH",
                )
            )
            consumer = [g.name for g in ctx.facts.gpus if re.search(r"GeForce|TITAN", g.name, re.I)]
            if used and consumer and DriverVersion.parse(m[1]) > drv:
                findings.append(
                    Finding(
                        status="fail",
                        message=f"forward-compatibility libcuda {m[1]} is on LD_LIBRARY_PATH, but "
                        f"{consumer[0]} does not support forward compatibility (error 804)",
                        remedy=f"remove {folder} from LD_LIBRARY_PATH, or upgrade the driver itself",
                    )
                )
    return findings

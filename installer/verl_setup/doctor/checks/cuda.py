"""Check `cuda`: the driver against the CUDA of the installed torch (both policies), a newer
toolkit on PATH/CUDA_HOME, a libcudart shadowing the wheel's, forward-compat libraries.

Driver rules come from matrices/cuda.yaml (NVIDIA's tables), never from anecdotes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from verl_setup.doctor.context import Context
from verl_setup.doctor.probes.env import torch_cuda
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold, skip
from verl_setup.host.system import toolkit_version
from verl_setup.matrix.cuda import CudaRules
from verl_setup.util.versions import DriverVersion, minor_of, parse_minor

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
    others = _toolkits(ctx, rules, drv, evidence)
    others += _cudart(ctx, cuda, evidence)
    others += _forward_compat(ctx, drv, evidence)
    # Which libcuda really loads matters where a compat library exists or the driver is too old.
    floor = rules.family_floor(cuda) if cuda else None
    below = cuda is not None and (floor is None or drv < floor)
    compat_seen = any(e.name == "forward compat" for e in evidence)
    target, _ = ctx.target
    loaded = (
        loaded_libcuda(Path(target.python) if target else None, dict(ctx.env))
        if compat_seen or (floor is not None and drv < floor)
        else None
    )
    if loaded is not None:
        evidence.append(Evidence(name="libcuda loaded", value=loaded[0], source="/proc/self/maps of a child"))
    findings = driver_vs_torch(rules, drv, cuda, how, loaded) if cuda else []
    findings += others
    if loaded is not None and not below:  # below the floor, driver_vs_torch judged the loaded libcuda
        findings += compat_in_use(loaded, rules, drv, cuda)
    findings += _te_build_needs(ctx, evidence)
    return fold(ID, findings, evidence, ok=f"driver {drv}")


def loaded_libcuda(python: Path | None, env: Mapping[str, str]) -> tuple[str, int | None] | None:
    """(path, driver API version) of the libcuda a process really loads, or None if none loads."""
    import json  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from verl_setup.scripts import script_path  # noqa: PLC0415
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    try:
        out = run([str(python or sys.executable), str(script_path("libcuda_loaded"))], timeout=20, env=env)
        data = json.loads(out.stdout.strip().splitlines()[-1])
    except (ProgramError, ValueError, IndexError):
        return None
    if not isinstance(data, dict) or not data.get("path"):
        return None
    api = data.get("api")
    return str(data["path"]), api if isinstance(api, int) else None


def compat_in_use(
    loaded: tuple[str, int | None], rules: CudaRules, drv: DriverVersion, cuda: str | None
) -> list[Finding]:
    """Forward compatibility works only if the compat libcuda is the one loaded."""
    floor = rules.family_floor(cuda) if cuda else None
    if "/compat/" in loaded[0]:
        return [
            Finding(
                status="pass",
                message=f"the forward-compatibility libcuda is loaded ({_libcuda(loaded)}): "
                f"CUDA {cuda} runs over kernel driver {drv} (data-center GPUs only)",
            )
        ]
    if floor is not None and drv < floor:
        return [below_family_floor(rules, drv, str(cuda), loaded)]
    return []


def _libcuda(loaded: tuple[str, int | None]) -> str:
    path, api = loaded
    return f"{path}, driver API {f'{api // 1000}.{api % 1000 // 10}' if api else None}"


def below_family_floor(
    rules: CudaRules, drv: DriverVersion, cuda: str, loaded: tuple[str, int | None] | None
) -> Finding:
    """The driver is below the CUDA family's floor and no forward-compatibility libcuda is loaded."""
    floor, full = rules.family_floor(cuda), rules.full_support(cuda)
    where = (
        ""
        if loaded is None
        else f"; the loaded libcuda is the host driver's ({_libcuda(loaded)}), not a forward-compat one"
    )
    return Finding(
        status="fail",
        message=f"driver {drv} cannot run CUDA {cuda} under the compat or strict policy (the CUDA "
        f"{cuda.split('.', maxsplit=1)[0]}.x family needs >= {floor}): torch fails with 'CUDA driver "
        f"version is insufficient for CUDA runtime version'{where}",
        remedy=f"upgrade the driver to >= {full or floor}, install a torch built for CUDA <= "
        f"{rules.newest_cuda(drv)} (`verl-setup plan` picks one), or on a data-center GPU run inside the "
        "image `verl-setup render docker --policy forward` makes (it installs cuda-compat and puts its "
        "folder first on LD_LIBRARY_PATH)",
    )


def _te_build_needs(ctx: Context, evidence: list[Evidence]) -> list[Finding]:
    """What building TransformerEngine's torch module needs (a Megatron row): CUDA_HOME, nvcc of
    torch's CUDA major, and cuDNN headers (its csrc includes cudnn.h)."""
    row, _ = ctx.row
    if row is None or "transformer-engine-torch" not in row.packages or row.torch.cuda is None:
        return []
    home = ctx.env.get("CUDA_HOME") or ctx.env.get("CUDA_PATH")
    problems = []
    if not home:
        problems.append(
            "CUDA_HOME is not set (TransformerEngine's build reads it to find nvcc and the CUDA headers)"
        )
    nvcc = Path(home) / "bin" / "nvcc" if home else None
    found = toolkit_version(Path(home))[0] if home and nvcc and nvcc.exists() else None
    if home and found is None:
        problems.append(f"no nvcc under CUDA_HOME={home}")
    elif found and found.split(".")[0] != row.torch.cuda.split(".")[0]:
        problems.append(f"nvcc under CUDA_HOME is CUDA {found}, torch is built with CUDA {row.torch.cuda}")
    headers = _cudnn_headers(ctx, home)
    evidence.append(
        Evidence(
            name="cudnn.h", value=headers or "not found", source="CUDA_HOME, /usr/include, nvidia-cudnn wheel"
        )
    )
    if headers is None:
        problems.append(
            "no cudnn.h (install the cuDNN dev headers, e.g. libcudnn9-dev-cuda-13, or nvidia-cudnn-cu13)"
        )
    if not problems:
        return [
            Finding(
                status="pass",
                message=f"a TransformerEngine build has CUDA_HOME={home}, nvcc {found}, {headers}",
            )
        ]
    return [
        Finding(
            status="warn",
            message="--build transformer-engine-torch would fail: " + "; ".join(problems),
            remedy="fix these before `verl-setup install --build transformer-engine-torch`, or use --without "
            "transformer-engine-torch (the Megatron backend then cannot train)",
        )
    ]


def _cudnn_headers(ctx: Context, home: str | None) -> str | None:
    candidates = [Path(home) / "include" / "cudnn.h"] if home else []
    candidates += [Path("/usr/include/cudnn.h"), *Path("/usr/include").glob("*-linux-gnu/cudnn.h")]
    target, _ = ctx.target
    if target is not None:
        candidates += list(Path(target.purelib).glob("nvidia/cudnn/include/cudnn.h"))
    return next((str(c) for c in candidates if c.exists()), None)


def _torch_cuda(ctx: Context) -> tuple[str | None, str]:
    target, _ = ctx.target
    if target is not None and "torch" in target.dists:
        cuda, source = torch_cuda(target.dists["torch"], target.requires.get("torch", ()))
        return cuda, f"torch {target.dists['torch']} in {target.prefix}: {source}"
    row, how = ctx.row
    if row is not None and row.torch.cuda:
        return row.torch.cuda, f"no torch installed; row {row.id} ({how}) installs torch {row.torch.version}"
    return None, "no torch installed and no row to plan from"


def driver_vs_torch(
    rules: CudaRules, drv: DriverVersion, cuda: str, how: str, loaded: tuple[str, int | None] | None = None
) -> list[Finding]:
    """The driver against torch's CUDA under both policies; below the family floor only a loaded
    forward-compatibility libcuda (`loaded`: what a child process really maps) runs it."""
    floor, full = rules.family_floor(cuda), rules.full_support(cuda)
    if floor is None or drv < floor:
        if loaded is not None and "/compat/" in loaded[0]:
            return compat_in_use(loaded, rules, drv, cuda)
        return [below_family_floor(rules, drv, cuda, loaded)]
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
        short = minor_of(version)
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
            return parse_minor(minor_of(version), "CUDA")
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

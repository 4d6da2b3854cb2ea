"""Does a row fit a target: every requirement it fails, in words with the numbers (select.py ranks)."""

from __future__ import annotations

from packaging.version import Version

from verl_setup.matrix.load import Matrix
from verl_setup.matrix.schema import Row
from verl_setup.plan import accelerator
from verl_setup.plan.target import GpuSpec, Target
from verl_setup.util.versions import DriverVersion, fmt, parse_minor


def request_reasons(row: Row, target: Target) -> list[str]:
    """How `row` differs from what the user asked for (verl, engine, Python)."""
    reasons = []
    if row.deprecated:
        reasons.append("deprecated row")
    if target.verl.value and not matches_prefix(row.verl.version, target.verl.value):
        reasons.append(f"verl {row.verl.version} is not the requested {target.verl.value}")
    if target.engine.value and row.engine.name != target.engine.value:
        reasons.append(f"engine {row.engine.name} is not the requested {target.engine.value}")
    if row.backend != target.backend.value:
        how = "requested" if target.backend.source != "default" else "default (ask with --backend)"
        reasons.append(f"training backend {row.backend}, not the {how} {target.backend.value}")
    wanted = target.python.value
    if wanted is not None and fmt(wanted[:2]) not in row.python.supported:
        reasons.append(f"Python {fmt(wanted)} requested, row supports {', '.join(row.python.supported)}")
    return reasons


def _floor_set_by(row: Row, matrix: Matrix) -> str:
    """ " (set by llguidance 1.7.6 (manylinux_2_31): ...)": the wheels that set the row's glibc
    floor, as `matrix prove` computed them, else the row's evidence for it."""
    from verl_setup.matrix.proof import floor_setters  # noqa: PLC0415

    setters = floor_setters(matrix.proof, row)
    if setters:
        return f" (set by {', '.join(setters)}: its wheels, computed by matrix prove)"
    evidence = row.evidence.get("requires.glibc")
    return f" ({evidence})" if evidence else ""


def host_reasons(row: Row, target: Target, matrix: Matrix) -> list[str]:
    """Every requirement of `row` the machine fails."""
    reasons = []
    req = row.requires
    if target.arch.value is not None and target.arch.value not in req.arch:
        reasons.append(f"platform {' or '.join(req.arch)} needed, host is {target.arch.value}")
    glibc = target.glibc.value
    if glibc and version_tuple(glibc) < version_tuple(req.glibc):
        reasons.append(f"glibc >= {req.glibc} needed, host has {glibc}{_floor_set_by(row, matrix)}")
    on_accelerator = accelerator.reasons(row, target.accelerator.value, target.engine.value)
    if on_accelerator is not None:
        return reasons + on_accelerator
    has_gpu = target.driver.value is not None or bool(target.gpus.value)
    if not req.gpu:
        if has_gpu and target.engine.value != "none":
            reasons.append(
                "CPU-only development row, and this machine has an NVIDIA GPU (ask with --engine none)"
            )
        return reasons
    if not has_gpu:
        reasons.append(
            "needs an NVIDIA GPU and driver; none found (plan for another machine with --driver and --gpu)"
        )
        return reasons
    reasons += driver_reasons(row, target, matrix)
    reasons += _gpu_reasons(row, target.gpus.value, matrix)
    return reasons


def driver_reasons(row: Row, target: Target, matrix: Matrix) -> list[str]:
    driver, req = target.driver.value, row.requires
    if driver is None or req.driver is None or req.cuda is None:
        return []
    reasons = _architecture_floor_reasons(target, matrix)
    needed_family = matrix.cuda.family_floor(req.cuda)
    major = req.cuda.split(".")[0]
    if needed_family is not None and driver < needed_family:
        if target.policy.value == "forward":
            why_not = forward_compat_refusal(req.cuda, target, matrix)
            return reasons + ([why_not] if why_not else [])
        return [
            *reasons,
            f"driver >= {needed_family} needed for any CUDA {major}.x (this row uses {req.cuda}), "
            f"host has {driver}",
        ]
    if target.policy.value == "strict":
        strict = DriverVersion.parse(req.driver.strict)
        if driver < strict:
            reasons.append(
                f"driver >= {strict} needed for full CUDA {req.cuda} support (policy strict), "
                f"host has {driver}"
            )
    else:
        compat = DriverVersion.parse(req.driver.compat)
        if driver < compat:
            reasons.append(f"driver >= {compat} needed (policy {target.policy.value}), host has {driver}")
    return reasons


def _architecture_floor_reasons(target: Target, matrix: Matrix) -> list[str]:
    """A GPU newer than the driver: no row runs, whatever its CUDA (the architecture's floor)."""
    driver, reasons = target.driver.value, []
    for gpu in distinct_gpus(target.gpus.value):
        arch = matrix.cuda.architecture(gpu.compute_capability)
        if driver is not None and arch and arch.min_driver and driver < DriverVersion.parse(arch.min_driver):
            reasons.append(
                f"GPU {gpu.name!r} ({arch.name}) needs driver >= {arch.min_driver} at all, host has {driver}"
            )
    return reasons


def driver_floor(row: Row, target: Target, matrix: Matrix) -> DriverVersion | None:
    """The lowest driver with which `row` fits under the target's policy (for ranking)."""
    req = row.requires
    if req.driver is None or req.cuda is None:
        return None
    floors = [
        DriverVersion.parse(req.driver.strict if target.policy.value == "strict" else req.driver.compat)
    ]
    for gpu in distinct_gpus(target.gpus.value):
        arch = matrix.cuda.architecture(gpu.compute_capability)
        if arch and arch.min_driver:
            floors.append(DriverVersion.parse(arch.min_driver))
    return max(floors)


def forward_compat_refusal(cuda: str, target: Target, matrix: Matrix) -> str | None:
    """Why CUDA forward compatibility cannot carry `cuda` on this target; None when it can."""
    facts, driver = matrix.cuda.facts.forward_compat, target.driver.value
    major = cuda.split(".", maxsplit=1)[0]
    if facts is None or driver is None:
        return f"policy forward: the matrix has no forward-compatibility facts for CUDA {major}"
    branches = facts.branches.get(major, ())
    branch = str(driver.major)
    if branch not in branches:
        listed = ", ".join(f"R{b}" for b in branches) or "none"
        return (
            f"policy forward: driver branch R{branch} is not one NVIDIA supports forward compatibility "
            f"to CUDA {major} on (supported: {listed}; source {facts.source} in cuda.yaml)"
        )
    not_dc = [g.name for g in distinct_gpus(target.gpus.value) if not matrix.cuda.is_data_center(g.name)]
    if not target.gpus.value:
        return (
            "policy forward: the GPU model is unknown, and forward compatibility is for data-center GPUs only"
        )
    if not_dc:
        return (
            f"policy forward: GPU {not_dc[0]!r} is not a data-center GPU, and forward compatibility is for "
            "data-center GPUs only (NVIDIA's CUDA Compatibility guide: \"Forward Compatibility is "
            "applicable only for systems with: NVIDIA Data Center GPUs. Select NGC Server Ready SKUs of "
            'RTX cards. Jetson boards.")'
        )
    return None


def _gpu_reasons(row: Row, gpus: tuple[GpuSpec, ...], matrix: Matrix) -> list[str]:
    cc_range, reasons = row.requires.compute_capability, []
    if cc_range is None or row.requires.cuda is None:
        return []
    low, high = parse_minor(cc_range.min, "sm"), parse_minor(cc_range.max, "sm")
    for gpu in distinct_gpus(gpus):
        cc = parse_minor(gpu.compute_capability, "sm")
        arch = matrix.cuda.architecture(gpu.compute_capability)
        if cc < low:
            reasons.append(
                f"compute capability >= {cc_range.min} needed, GPU {gpu.name!r} is {gpu.compute_capability}"
            )
        elif arch and parse_minor(arch.first_cuda, "CUDA") > parse_minor(row.requires.cuda, "CUDA"):
            reasons.append(
                f"GPU {gpu.name!r} ({arch.name}, sm {gpu.compute_capability}) needs CUDA >= "
                f"{arch.first_cuda}, row is built with {row.requires.cuda}"
            )
        elif cc > high:
            reasons.append(
                f"compute capability <= {cc_range.max} supported by this row's builds, "
                f"GPU {gpu.name!r} is {gpu.compute_capability}"
            )
    return reasons


def distinct_gpus(gpus: tuple[GpuSpec, ...]) -> list[GpuSpec]:
    seen: dict[tuple[str, str], GpuSpec] = {}
    for gpu in gpus:
        seen.setdefault((gpu.name, gpu.compute_capability), gpu)
    return list(seen.values())


def relies_on_forward_compat(row: Row, target: Target, matrix: Matrix) -> bool:
    """--policy forward, and the driver is below the row's CUDA family floor."""
    req, driver = row.requires, target.driver.value
    family = matrix.cuda.family_floor(req.cuda) if req.cuda else None
    return target.policy.value == "forward" and driver is not None and family is not None and driver < family


def matches_prefix(version: str, prefix: str) -> bool:
    wanted = prefix.split(".")
    return Version(version).base_version.split(".")[: len(wanted)] == wanted


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())

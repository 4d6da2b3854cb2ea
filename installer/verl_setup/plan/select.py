"""select(Target, Matrix) -> Plan: the fitting row, warnings, and every other row's reasons."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from verl_setup.errors import NoCompatibleRowError
from verl_setup.matrix.load import Matrix
from verl_setup.matrix.proof import rank
from verl_setup.matrix.schema import Row, Unfit
from verl_setup.plan.target import GpuSpec, Target
from verl_setup.util.versions import DriverVersion, fmt, parse_minor

PLAN_SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class Rejection:
    """A row that does not fit, and every requirement it failed, in words with numbers."""

    id: str
    reasons: tuple[str, ...]
    off_request: bool = False  # it fails what the user asked for, not only what the host has
    # What the user would have to change for the row to fit, for ranking the nearest rows.
    driver_needed: DriverVersion | None = None  # a driver upgrade to at least this
    python_change: bool = False  # another Python
    hardware_change: bool = False  # another GPU, CPU architecture or OS (glibc): the most costly


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The selected row with the exact Python to install, and why every other row lost."""

    row: Row
    python: str
    policy: str
    target: Target
    warnings: tuple[str, ...]
    rejected: tuple[Rejection, ...]
    matrix: Matrix
    index_url: str | None
    unfit: tuple[Unfit, ...] = ()  # engine releases the matrix says the asked verl line excludes

    @property
    def needs_forward_compat(self) -> bool:
        """The row's CUDA runs on this driver only through CUDA forward compatibility (the image)."""
        return relies_on_forward_compat(self.row, self.target, self.matrix)

    def to_json(self) -> dict[str, Any]:
        """The documented `plan --json` object (schema 1)."""
        return {
            "schema": PLAN_SCHEMA,
            "row": self.row.to_dict(),
            "proof": dict(zip(("level", "detail"), self.matrix.proof_of(self.row), strict=True)),
            "python": self.python,
            "policy": self.policy,
            "index_url": self.index_url,
            "requirements": self.row.requirements(),
            "facts": self.target.facts_json(),
            "warnings": list(self.warnings),
            "rejected": [{"id": r.id, "reasons": list(r.reasons)} for r in self.rejected],
            "unfit": [
                {"verl": u.verl, "engine": u.engine, "versions": list(u.versions), "reason": u.reason}
                for u in self.unfit
            ],
            "matrix": {"path": str(self.matrix.path), "sha256": self.matrix.sha256},
        }


def select(target: Target, matrix: Matrix) -> Plan:
    """Pick the best-proven fitting row, then the newest verl, then file order."""
    fitting: list[Row] = []
    rejected: list[Rejection] = []
    for row in matrix.rows:
        rejection = rejection_of(row, target, matrix)
        if rejection is None:
            fitting.append(row)
        else:
            rejected.append(rejection)
    unfit = _unfit_for(target, matrix)
    if not fitting:
        raise NoCompatibleRowError(_no_fit_message(rejected, matrix, unfit))
    order = {row.id: i for i, row in enumerate(matrix.rows)}
    fitting.sort(key=lambda r: (-rank(matrix.proof_of(r)[0]), -_release(r.verl.version), order[r.id]))
    chosen, others = fitting[0], fitting[1:]
    rejected += [
        Rejection(
            id=r.id,
            reasons=(
                f"fits, but {chosen.id} is preferred (better proven, newer verl, or earlier in the matrix)",
            ),
        )
        for r in others
    ]
    python, python_warnings = _python_for(chosen, target)
    return Plan(
        row=chosen,
        python=python,
        policy=target.policy.value,
        target=target,
        warnings=tuple(_warnings(chosen, target, matrix) + python_warnings),
        rejected=tuple(sorted(rejected, key=lambda r: order[r.id])),
        matrix=matrix,
        index_url=matrix.index_url(chosen),
        unfit=unfit,
    )


def rejection_of(row: Row, target: Target, matrix: Matrix) -> Rejection | None:
    """Why `row` does not fit, with what would have to change; None when it fits."""
    asked = request_reasons(row, target)
    driver = _driver_reasons(row, target, matrix) if _gpu_row_on_gpu_host(row, target) else []
    host = host_reasons(row, target, matrix)
    if not asked and not host:
        return None
    python = any(r.startswith("Python ") for r in asked)
    hardware = [r for r in host if r not in driver]
    return Rejection(
        id=row.id,
        reasons=tuple(asked + host),
        off_request=any(not r.startswith("Python ") for r in asked),
        driver_needed=_driver_floor(row, target, matrix) if driver else None,
        python_change=python,
        hardware_change=bool(hardware),
    )


def _gpu_row_on_gpu_host(row: Row, target: Target) -> bool:
    return row.requires.gpu and (target.driver.value is not None or bool(target.gpus.value))


def _unfit_for(target: Target, matrix: Matrix) -> tuple[Unfit, ...]:
    """The matrix's "does not fit" records for the engine asked for (and the verl line, if asked)."""
    return tuple(
        u
        for u in matrix.rows_file.unfit
        if u.engine == target.engine.value
        and (not target.verl.value or _matches_prefix(u.verl, target.verl.value))
    )


def plan_row(target: Target, matrix: Matrix, row_id: str) -> Plan:
    """A plan for one named row (`--row`): what it fails on this target is a warning, not a refusal."""
    row = matrix.row(row_id)
    reasons = request_reasons(row, target) + host_reasons(row, target, matrix)
    python, python_warnings = _python_for(row, target)
    forced = [f"row {row.id} was asked for with --row although: {reason}" for reason in reasons]
    return Plan(
        row=row,
        python=python,
        policy=target.policy.value,
        target=target,
        warnings=tuple(forced + _warnings(row, target, matrix) + python_warnings),
        rejected=(),
        matrix=matrix,
        index_url=matrix.index_url(row),
    )


def _release(version: str) -> float:
    """A sortable number for a version (newest verl first)."""
    release = (*Version(version).release, 0, 0, 0)
    return release[0] * 1e6 + release[1] * 1e3 + release[2]


def request_reasons(row: Row, target: Target) -> list[str]:
    """How `row` differs from what the user asked for (verl, engine, Python)."""
    reasons = []
    if row.deprecated:
        reasons.append("deprecated row")
    if target.verl.value and not _matches_prefix(row.verl.version, target.verl.value):
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


def host_reasons(row: Row, target: Target, matrix: Matrix) -> list[str]:
    """Every requirement of `row` the machine fails."""
    reasons = []
    req = row.requires
    if target.arch.value is not None and target.arch.value not in req.arch:
        reasons.append(f"platform {' or '.join(req.arch)} needed, host is {target.arch.value}")
    glibc = target.glibc.value
    if glibc and _version_tuple(glibc) < _version_tuple(req.glibc):
        reasons.append(f"glibc >= {req.glibc} needed, host has {glibc}")
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
    reasons += _driver_reasons(row, target, matrix)
    reasons += _gpu_reasons(row, target.gpus.value, matrix)
    return reasons


def _driver_reasons(row: Row, target: Target, matrix: Matrix) -> list[str]:
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
    for gpu in _distinct(target.gpus.value):
        arch = matrix.cuda.architecture(gpu.compute_capability)
        if driver is not None and arch and arch.min_driver and driver < DriverVersion.parse(arch.min_driver):
            reasons.append(
                f"GPU {gpu.name!r} ({arch.name}) needs driver >= {arch.min_driver} at all, host has {driver}"
            )
    return reasons


def _driver_floor(row: Row, target: Target, matrix: Matrix) -> DriverVersion | None:
    """The lowest driver with which `row` fits under the target's policy (for ranking)."""
    req = row.requires
    if req.driver is None or req.cuda is None:
        return None
    floors = [
        DriverVersion.parse(req.driver.strict if target.policy.value == "strict" else req.driver.compat)
    ]
    for gpu in _distinct(target.gpus.value):
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
    not_dc = [g.name for g in _distinct(target.gpus.value) if not matrix.cuda.is_data_center(g.name)]
    if not target.gpus.value:
        return (
            "policy forward: the GPU model is unknown, and forward compatibility is for data-center GPUs only"
        )
    if not_dc:
        return (
            f"policy forward: GPU {not_dc[0]!r} is not a data-center GPU, and forward compatibility is for "
            "data-center GPUs only (NVIDIA's CUDA Compatibility guide)"
        )
    return None


def _gpu_reasons(row: Row, gpus: tuple[GpuSpec, ...], matrix: Matrix) -> list[str]:
    cc_range, reasons = row.requires.compute_capability, []
    if cc_range is None or row.requires.cuda is None:
        return []
    low, high = parse_minor(cc_range.min, "sm"), parse_minor(cc_range.max, "sm")
    for gpu in _distinct(gpus):
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


def _distinct(gpus: tuple[GpuSpec, ...]) -> list[GpuSpec]:
    seen: dict[tuple[str, str], GpuSpec] = {}
    for gpu in gpus:
        seen.setdefault((gpu.name, gpu.compute_capability), gpu)
    return list(seen.values())


def _warnings(row: Row, target: Target, matrix: Matrix) -> list[str]:
    out = []
    req, driver = row.requires, target.driver.value
    level, words = matrix.proof_of(row)
    if rank(level) < rank("imports"):
        out.append(f"row {row.id} is not proven to import: {words}")
    if target.arch.value is None or target.glibc.value is None:
        out.append(
            "CPU architecture or glibc of the target not given, so not checked: the row needs "
            f"{'/'.join(req.arch)} with glibc >= {req.glibc} (give --arch and --glibc, --host FILE, "
            "or VERL_SETUP_ARCH and VERL_SETUP_GLIBC)"
        )
    out += _forward_warnings(row, target, matrix)
    family = matrix.cuda.family_floor(req.cuda) if req.cuda else None
    below_family = driver is not None and family is not None and driver < family
    if req.gpu and driver is not None and req.driver and req.cuda and not below_family:
        strict = DriverVersion.parse(req.driver.strict)
        if driver < strict:
            out.append(
                f"driver {driver} runs CUDA {req.cuda} only through minor-version compatibility; "
                f"full support needs >= {strict}. Kernels that JIT-compile newer PTX will fail; "
                "--policy strict refuses this"
            )
    if req.gpu and driver is None and target.gpus.value:
        out.append("driver version unknown: the driver requirement was not checked (give --driver)")
    if req.gpu and driver is not None and not target.gpus.value:
        out.append("GPU model unknown: compute capability was not checked (give --gpu or --sm)")
    if len({g.compute_capability for g in target.gpus.value}) > 1:
        out.append(
            "GPUs of different compute capability: the stack must carry kernels for each; checked for all"
        )
    minor = _planned_minor(row, target)
    for issue in row.known_issues:
        if not issue.python or minor in issue.python:
            out.append(f"known issue: {issue.summary} (source: {issue.source})")
    return out


def relies_on_forward_compat(row: Row, target: Target, matrix: Matrix) -> bool:
    """--policy forward, and the driver is below the row's CUDA family floor."""
    req, driver = row.requires, target.driver.value
    family = matrix.cuda.family_floor(req.cuda) if req.cuda else None
    return target.policy.value == "forward" and driver is not None and family is not None and driver < family


def _forward_warnings(row: Row, target: Target, matrix: Matrix) -> list[str]:
    """What a plan that rests on CUDA forward compatibility must say, loudly."""
    req, driver, facts = row.requires, target.driver.value, matrix.cuda.facts.forward_compat
    if (
        not relies_on_forward_compat(row, target, matrix)
        or req.cuda is None
        or facts is None
        or driver is None
    ):
        return []
    major, minor = req.cuda.split(".")[:2]
    package = facts.package.format(major=major, minor=minor)
    out = [
        f"policy forward: CUDA {req.cuda} on driver {driver} works only inside the rendered image, which "
        f"installs {package} and puts {facts.library_dir.format(major=major, minor=minor)} first on "
        "LD_LIBRARY_PATH; `install` refuses it on this host (a venv would fail at CUDA initialisation) "
        "(render docker; `verl-setup doctor cuda` in the container shows whether the compat driver loaded)"
    ]
    branch = str(driver.major)
    if branch in facts.end_of_life:
        out.append(
            f"policy forward: NVIDIA lists driver branch R{branch} as end of life from "
            f"{facts.end_of_life[branch]} ({facts.source} in cuda.yaml): forward compatibility on it "
            "gets no fixes"
        )
    return out


def _planned_minor(row: Row, target: Target) -> str:
    wanted = target.python.value
    return fmt(wanted[:2]) if wanted else ".".join(row.python.recommended.split(".")[:2])


def _python_for(row: Row, target: Target) -> tuple[str, list[str]]:
    """The exact Python to install: requested, else the row's recommendation, else a host match."""
    wanted = target.python.value
    if wanted is None:
        return row.python.recommended, []
    if len(wanted) == 3:
        warnings = []
        if fmt(wanted) != row.python.recommended:
            warnings.append(
                f"Python {fmt(wanted)} differs from the row's recommended {row.python.recommended}; "
                "use the same exact version on every Ray node"
            )
        return fmt(wanted), warnings
    if fmt(wanted) == ".".join(row.python.recommended.split(".")[:2]):
        return row.python.recommended, []
    on_host = sorted(
        (p.version for p in target.host_pythons if p.version.startswith(fmt(wanted) + ".")),
        key=_version_tuple,
    )
    if on_host:
        return on_host[-1], [f"Python {fmt(wanted)} pinned to {on_host[-1]}, the newest found on this host"]
    return fmt(wanted), [
        f"no exact Python {fmt(wanted)}.x pinned: uv will pick the newest; pass --python {fmt(wanted)}.Z "
        "so every Ray node runs the same patch"
    ]


def _matches_prefix(version: str, prefix: str) -> bool:
    wanted = prefix.split(".")
    return Version(version).base_version.split(".")[: len(wanted)] == wanted


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def _no_fit_message(rejected: list[Rejection], matrix: Matrix, unfit: tuple[Unfit, ...] = ()) -> str:
    nearest = nearest_rows(rejected, matrix)[:3]
    parts = "; ".join(f"{r.id}: {', '.join(r.reasons)}" for r in nearest)
    message = f"no matrix row fits this machine. Nearest (smallest change first): {parts}"
    if unfit:
        message += ". Not offered: " + "; ".join(_unfit_words(u) for u in unfit)
    return message


def _unfit_words(unfit: Unfit) -> str:
    return f"{unfit.engine} {', '.join(unfit.versions)} for verl {unfit.verl}: {unfit.reason}"


def nearest_rows(rejected: list[Rejection], matrix: Matrix) -> list[Rejection]:
    """Rejected rows by the least the user must change: rows matching the request first, then
    those needing only a driver upgrade (lowest first), then a Python change, then new hardware."""
    rows = {row.id: (i, row) for i, row in enumerate(matrix.rows)}

    def cost(r: Rejection) -> tuple[bool, bool, bool, bool, tuple[int, ...], int, int]:
        index, row = rows[r.id]
        driver = (r.driver_needed.major, r.driver_needed.minor) if r.driver_needed else (0,)
        return (
            r.off_request,
            not row.requires.gpu,
            r.hardware_change,
            r.python_change,
            driver,
            len(r.reasons),
            index,
        )

    return sorted(rejected, key=cost)

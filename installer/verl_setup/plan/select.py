"""select(Target, Matrix) -> Plan: the fitting row, warnings, and every other row's reasons."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from verl_setup.errors import NoCompatibleRowError
from verl_setup.matrix.load import Matrix
from verl_setup.matrix.proof import rank
from verl_setup.matrix.schema import Row
from verl_setup.plan.target import GpuSpec, Target
from verl_setup.util.versions import DriverVersion, fmt, parse_minor

PLAN_SCHEMA = 1


@dataclass(frozen=True, kw_only=True)
class Rejection:
    """A row that does not fit, and every requirement it failed, in words with numbers."""

    id: str
    reasons: tuple[str, ...]
    off_request: bool = False  # it fails what the user asked for, not only what the host has


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
            "matrix": {"path": str(self.matrix.path), "sha256": self.matrix.sha256},
        }


def select(target: Target, matrix: Matrix) -> Plan:
    """Pick the best-proven fitting row, then the newest verl, then file order."""
    fitting: list[Row] = []
    rejected: list[Rejection] = []
    for row in matrix.rows:
        asked = request_reasons(row, target)
        reasons = asked + host_reasons(row, target, matrix)
        if reasons:
            rejected.append(Rejection(id=row.id, reasons=tuple(reasons), off_request=bool(asked)))
        else:
            fitting.append(row)
    if not fitting:
        raise NoCompatibleRowError(_no_fit_message(rejected, matrix))
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
    needed_family = matrix.cuda.family_floor(req.cuda)
    if needed_family is not None and driver < needed_family:
        major = req.cuda.split(".")[0]
        return [
            f"driver >= {needed_family} needed for any CUDA {major}.x (this row uses {req.cuda}), "
            f"host has {driver}"
        ]
    if target.policy.value == "strict":
        strict = DriverVersion.parse(req.driver.strict)
        if driver < strict:
            return [
                f"driver >= {strict} needed for full CUDA {req.cuda} support (policy strict), "
                f"host has {driver}"
            ]
    else:
        compat = DriverVersion.parse(req.driver.compat)
        if driver < compat:
            return [f"driver >= {compat} needed (policy compat), host has {driver}"]
    return []


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
            f"{'/'.join(req.arch)} with glibc >= {req.glibc} (give --host FILE, or VERL_SETUP_ARCH "
            "and VERL_SETUP_GLIBC)"
        )
    if req.gpu and driver is not None and req.driver and req.cuda:
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


def _no_fit_message(rejected: list[Rejection], matrix: Matrix) -> str:
    rows = {row.id: (i, row) for i, row in enumerate(matrix.rows)}

    def distance(r: Rejection) -> tuple[bool, bool, int, tuple[int, ...], int]:
        # Rows matching the request first, GPU rows before the CPU row, fewest failed
        # requirements, then the oldest driver needed.
        index, row = rows[r.id]
        driver = row.requires.driver.compat if row.requires.driver else "0"
        return (r.off_request, not row.requires.gpu, len(r.reasons), _version_tuple(driver), index)

    nearest = sorted(rejected, key=distance)[:3]
    parts = "; ".join(f"{r.id}: {', '.join(r.reasons)}" for r in nearest)
    return f"no matrix row fits this machine. Nearest: {parts}"

"""select(Target, Matrix) -> Plan: the fitting row, warnings, and every other row's reasons."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from verl_setup.errors import NoCompatibleRowError
from verl_setup.matrix.closure import Closure
from verl_setup.matrix.load import Matrix
from verl_setup.matrix.proof import rank
from verl_setup.matrix.schema import Row, Unfit
from verl_setup.plan.accelerator import no_row_words as accelerator_no_row
from verl_setup.plan.fit import (
    driver_floor,
    driver_reasons,
    host_reasons,
    matches_prefix,
    relies_on_forward_compat,
    request_reasons,
    version_tuple,
)
from verl_setup.plan.target import Target
from verl_setup.util.versions import DriverVersion, fmt, minor_of


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
    # The row's packages built against torch that no enabled wheel source serves here (empty: it
    # installs whole, as far as the matrix and `matrix check`'s last look know).
    missing_wheels: tuple[str, ...] = ()
    # A closure other than the recorded one: a fresh resolution (`--upgrade`), or a lock's.
    closure_override: Closure | None = None

    @property
    def closure(self) -> Closure:
        """What the install holds every package below the row's pins to, on this target."""
        if self.closure_override is not None:
            return self.closure_override
        return self.matrix.closure(self.row, self.python, self.target.arch.value)

    @property
    def needs_forward_compat(self) -> bool:
        """The row's CUDA runs on this driver only through CUDA forward compatibility (the image)."""
        return relies_on_forward_compat(self.row, self.target, self.matrix)

    def to_json(self) -> dict[str, Any]:
        """The documented `plan --json` data (schemas/plan.json)."""
        return {
            "row": self.row.to_dict(),
            "proof": self.matrix.proof_json(self.row),
            "closure": self.closure.to_json(),
            "python": self.python,
            "policy": self.policy,
            "prefer": self.target.prefer.value,
            "installs_whole": not self.missing_wheels,
            "missing_wheels": list(self.missing_wheels),
            "index_url": self.index_url,
            "requirements": self.row.requirements(),
            "facts": self.target.facts_json(),
            "warnings": list(self.warnings),
            "rejected": [{"id": r.id, "reasons": list(r.reasons)} for r in self.rejected],
            "unfit": [_unfit_json(u) for u in self.unfit],
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
        message = _no_fit_message(rejected, matrix, unfit)
        if (accel := target.accelerator.value) is not None:
            head = accelerator_no_row(accel, matrix.rows)
            # no row of its family at all: the NVIDIA rows are no "nearest" change
            mine = {r.id for r in matrix.rows if r.requires.accelerator == accel.family}
            why = "; ".join(f"{r.id}: {', '.join(r.reasons)}" for r in rejected if r.id in mine)
            message = head + f"None fits: {why}" if mine else head.rstrip()
        raise NoCompatibleRowError(message, data=_no_fit_data(target, rejected, matrix, unfit))
    order = {row.id: i for i, row in enumerate(matrix.rows)}
    missing = {r.id: _missing(r, target, matrix) for r in fitting}

    def key(r: Row) -> tuple[int, float, bool, int]:
        whole_last = bool(missing[r.id]) if target.prefer.value == "whole" else False
        return (-rank(matrix.proof_of(r)[0]), -_release(r.verl.version), whole_last, order[r.id])

    fitting.sort(key=key)
    chosen, others = fitting[0], fitting[1:]
    rejected += [Rejection(id=r.id, reasons=(_lost(r, chosen, key, missing, target),)) for r in others]
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
        missing_wheels=tuple(missing[chosen.id]),
    )


def _missing(row: Row, target: Target, matrix: Matrix) -> list[str]:
    """What of the row's packages built against torch no enabled source serves this target."""
    from verl_setup.plan.whole import missing_wheels  # noqa: PLC0415  # plan.whole imports wheel_sources

    python = _python_for(row, target)[0]
    return missing_wheels(row, matrix, python=python, glibc=target.glibc.value)


def _lost(
    row: Row,
    chosen: Row,
    key: Callable[[Row], tuple[int, float, bool, int]],
    missing: Mapping[str, list[str]],
    target: Target,
) -> str:
    """Why a fitting row was not taken, by the first sort key that differs."""
    mine, theirs = key(row), key(chosen)
    if mine[0] != theirs[0]:
        why = "better proven"
    elif mine[1] != theirs[1]:
        why = "a newer verl"
    elif mine[2] != theirs[2]:
        why = (
            f"it installs whole from wheels (--prefer {target.prefer.value}), this row does not: "
            + "; ".join(missing[row.id])
        )
    else:
        why = "earlier in the matrix"
    return f"fits, but {chosen.id} is preferred: {why}"


def rejection_of(row: Row, target: Target, matrix: Matrix) -> Rejection | None:
    """Why `row` does not fit, with what would have to change; None when it fits."""
    asked = request_reasons(row, target)
    driver = driver_reasons(row, target, matrix) if _gpu_row_on_gpu_host(row, target) else []
    host = host_reasons(row, target, matrix)
    if not asked and not host:
        return None
    python = any(r.startswith("Python ") for r in asked)
    hardware = [r for r in host if r not in driver]
    return Rejection(
        id=row.id,
        reasons=tuple(asked + host),
        off_request=any(not r.startswith("Python ") for r in asked),
        driver_needed=driver_floor(row, target, matrix) if driver else None,
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
        and (not target.verl.value or matches_prefix(u.verl, target.verl.value))
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
    from verl_setup.plan.typed_names import branch_note  # noqa: PLC0415

    out += [note] if (note := branch_note(target.driver.source)) else []  # --driver 580
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
    from verl_setup.plan.issues import issue_line  # noqa: PLC0415

    for i, issue in enumerate(row.known_issues):  # one line each; `plan --known-issues` has the rest
        if not issue.python or minor in issue.python:
            out.append(issue_line(i, issue))
    return out


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
    major, minor = minor_of(req.cuda).split(".")
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
            "gets no fixes; NVIDIA's own list of the branches CUDA 13's cuda-compat package supports was "
            "not found, so R535/R570 as such branches rest on secondary sources"
        )
    return out


def _planned_minor(row: Row, target: Target) -> str:
    wanted = target.python.value
    return fmt(wanted[:2]) if wanted else minor_of(row.python.recommended)


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
    if fmt(wanted) == minor_of(row.python.recommended):
        return row.python.recommended, []
    on_host = sorted(
        (p.version for p in target.host_pythons if p.version.startswith(fmt(wanted) + ".")),
        key=version_tuple,
    )
    if on_host:
        return on_host[-1], [f"Python {fmt(wanted)} pinned to {on_host[-1]}, the newest found on this host"]
    return fmt(wanted), [
        f"no exact Python {fmt(wanted)}.x pinned: uv will pick the newest; pass --python {fmt(wanted)}.Z "
        "so every Ray node runs the same patch"
    ]


def _no_fit_message(rejected: list[Rejection], matrix: Matrix, unfit: tuple[Unfit, ...] = ()) -> str:
    nearest = nearest_rows(rejected, matrix)[:3]
    parts = "; ".join(f"{r.id}: {', '.join(r.reasons)}" for r in nearest)
    message = f"no matrix row fits this machine. Nearest (smallest change first): {parts}"
    if unfit:
        message += ". Not offered: " + "; ".join(_unfit_words(u) for u in unfit)
    return message


def _no_fit_data(
    target: Target, rejected: list[Rejection], matrix: Matrix, unfit: tuple[Unfit, ...]
) -> dict[str, Any]:
    """For a planner "no row fits" is a result: `plan --json` at exit 3 carries this (schemas/plan.json)."""
    return {
        "row": None,
        "facts": target.facts_json(),
        "nearest": [{"id": r.id, "reasons": list(r.reasons)} for r in nearest_rows(rejected, matrix)[:3]],
        "rejected": [{"id": r.id, "reasons": list(r.reasons)} for r in rejected],
        "unfit": [_unfit_json(u) for u in unfit],
        "matrix": {"path": str(matrix.path), "sha256": matrix.sha256},
    }


def _unfit_json(u: Unfit) -> dict[str, Any]:
    return {"verl": u.verl, "engine": u.engine, "versions": list(u.versions), "reason": u.reason}


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

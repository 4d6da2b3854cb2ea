"""`verl-setup matrix prove`: take rows through the path a user takes, and record how far each got.

For each row, with this package's own commands in child processes: `lock --row` (resolves: a
hashed resolution for the row's Python and platform), `install --row --no-import` into a
scratch prefix (installs: a real uv install, every pin verified), then `verify` (imports: the
import probe of what a training run imports), then `smoke` (trains: 2 GRPO steps of verl's own
main_ppo on a tiny model; on the CPU for the cpu row, on a GPU host for the others). The
`resolves` step also records the glibc floor computed from the manylinux tags of the wheels
resolved (maintenance/floors.py). The `gpu`
level is never set here: only a run on a GPU host records it. Results go to matrices/proof.yaml,
and each row's resolution to matrices/resolved.yaml (the baseline of `matrix check`), unless
--no-record.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from verl_setup import __version__
from verl_setup.environment.lock import read_lock
from verl_setup.environment.uv import uv_env
from verl_setup.errors import CheckFailedError, InstallError
from verl_setup.host.resources import online_cpus
from verl_setup.maintenance.check import default_index, floor_above, resolution_of, row_floor
from verl_setup.maintenance.closure_targets import with_targets
from verl_setup.maintenance.floors import Floor
from verl_setup.matrix.load import Matrix
from verl_setup.matrix.proof import ProofStep, record, today
from verl_setup.matrix.resolved import Resolution, record_resolved
from verl_setup.matrix.schema import Row
from verl_setup.output import Progress, emit
from verl_setup.util.runner import ProgramError, run, stream
from verl_setup.util.uvbin import find_uv

STEP_TIMEOUT_S = 3600.0


@dataclass(kw_only=True)
class RowResult:
    """How far one row got, with the seconds and the evidence of each step."""

    row: str
    steps: dict[str, ProofStep] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    failed: str | None = None
    skipped: str | None = None
    stopped: str | None = None  # reached what this machine can prove; why not further
    resolution: Resolution | None = None  # what `resolves` resolved to: `matrix check`'s baseline

    def to_json(self) -> dict[str, Any]:
        """Plain data for --json."""
        return {
            "row": self.row,
            "reached": list(self.steps),
            "seconds": self.seconds,
            "failed": self.failed,
            "skipped": self.skipped,
            "stopped": self.stopped,
            "detail": {k: v.detail for k, v in self.steps.items()},
        }


def _cli(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, str, str, float]:
    start = time.monotonic()
    try:
        out = stream([sys.executable, "-m", "verl_setup", *argv], timeout=STEP_TIMEOUT_S, env=env)
    except ProgramError as exc:
        return 1, "", str(exc), time.monotonic() - start
    return out.returncode, out.stdout, out.stderr, time.monotonic() - start


def _last_error(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("verl-setup: error:")]
    return (
        lines[-1].removeprefix("verl-setup: error: ") if lines else (stderr.strip().splitlines() or ["?"])[-1]
    )


def prove_row(  # noqa: PLR0911, PLR0915  # one return per step that can stop the proof
    row: Row, matrix: Matrix, work: Path, env: Mapping[str, str], say: Callable[[str], None]
) -> RowResult:
    """resolves, installs, imports, trains for one row, stopping at the first step that fails."""
    result = RowResult(row=row.id)
    if matrix.index_url(row) is not None and env.get("VERL_SETUP_PROVE_EXTRA_INDEXES") != "1":
        result.skipped = f"its torch comes from {matrix.index_url(row)}, which this run does not reach"
        return result
    tool = f"verl-setup {__version__}"
    # Packages built against torch are left out: prebuilt wheels are GitHub release assets and
    # builds need nvcc against a GPU torch for an hour or more, both out of reach here.
    common = ["--matrix", str(matrix.path), "--row", row.id, *_left_out_flags(row, matrix, env)]
    # A proof reads no VERL_SETUP_* of the user's but these: wheel sources (a wheelhouse built here)
    # go to lock and install as flags, and the installs step records which source each came from.
    sources = env.get("VERL_SETUP_PROVE_WHEEL_SOURCES", "").split(",")
    common += [flag for value in sources if value.strip() for flag in ("--wheel-source", value.strip())]
    lock = work / f"{row.id}.lock"
    say(f"{row.id}: resolves (lock)")
    code, _, err, seconds = _cli(["lock", *common, "--out", str(lock), "--json"], env)
    result.seconds["resolves"] = round(seconds, 1)
    if code != 0:
        result.failed = f"resolves: {_last_error(err)}"
        return result
    locked = read_lock(lock)
    resolved = resolution_of(lock.read_text(encoding="utf-8"))
    floor, why_not = _floor(row, matrix, resolved, env)
    if floor is None:
        result.failed = f"resolves: {why_not}"
        return result
    result.resolution = Resolution(
        row_sha256=row.content_hash(),
        python=locked.python,
        platform=locked.fields["platform"],
        pins=resolved,
        glibc_floor=floor.glibc,
        glibc_floor_set_by=floor.set_by,
    )
    header = {k: v for k, v in locked.fields.items() if k in ("python", "platform", "uv")}
    pins = len(locked.pins)
    lock.unlink()
    detail = {
        **header,
        "distributions": pins,
        "glibc_floor": floor.glibc,
        "glibc_floor_set_by": list(floor.set_by),
    }
    above = floor_above(row, floor)
    if above is not None:
        result.failed = f"resolves: {above}"
        return result
    result.steps["resolves"] = ProofStep(date=today(), tool=tool, detail=detail)
    machine = platform.machine()
    if machine not in row.requires.arch:
        result.stopped = (
            f"installs and imports need an {'/'.join(row.requires.arch)} host; this one is {machine}"
        )
        return result
    prefix = work / row.id
    say(f"{row.id}: installs (a real uv install, every pin verified)")
    code, out, err, seconds = _cli(
        ["install", *common, "--prefix", str(prefix), "--no-python-downloads", "--no-import", "--json"], env
    )
    result.seconds["installs"] = round(seconds, 1)
    try:
        if code != 0:
            result.failed = f"installs: {_last_error(err)}"
            return result
        manifest = json.loads(out)["data"]["manifest"]
        installed: dict[str, Any] = {
            "python": manifest["python"]["version"],
            "platform": manifest["platform"],
            "uv": manifest["tool"]["uv"],
            "distributions": len(manifest["distributions"]),
            "venv_mib": _size_mib(prefix),
            # Each package built against torch: how it got in (wheel, build, or left out) and from
            # which source, so a reduced stack never reads as the whole one.
            "extensions": {
                **{
                    name: {"mode": e["mode"], "source": e.get("source")}
                    for name, e in (manifest.get("torch_extensions") or {}).items()
                },
                **{
                    name: {
                        "mode": "without" if e["mode"] == "without" else "source",
                        "source": e["url"],
                        **({} if e["mode"] == "without" else _git_source(prefix, name, e["url"], env)),
                    }
                    for name, e in (manifest.get("sources") or {}).items()
                },
            },
        }
        result.steps["installs"] = ProofStep(date=today(), tool=tool, detail=installed)
        say(f"{row.id}: imports (the import probe)")
        code, out, err, seconds = _cli(["verify", "--prefix", str(prefix), "--json"], env)
        result.seconds["imports"] = round(seconds, 1)
        probe = (json.loads(out)["data"] or {}).get("import") if out.strip().startswith("{") else None
        if code != 0 or probe is None or not probe["ok"]:
            result.failed = f"imports: {probe['summary'] if probe else _last_error(err)}"
            return result
        gpu = [m["module"] for m in probe["modules"] if m["outcome"] == "gpu"]
        absent = [m["module"] for m in probe["modules"] if m["outcome"] == "absent"]
        detail = {"modules": len(probe["modules"]), "need_a_gpu": gpu, "seconds": probe["seconds"]}
        if absent:  # modules of the packages left out above, each named
            detail["left_out"] = absent
        known = [m["module"] for m in probe["modules"] if m["outcome"] == "known"]
        if known:  # imports the row's known issues break (known_broken_imports), each named
            detail["known_issues"] = known
        result.steps["imports"] = ProofStep(date=today(), tool=tool, detail=detail)
        _trains(row, prefix, env, say, result, tool=tool)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)
    return result


def _trains(
    row: Row,
    prefix: Path,
    env: Mapping[str, str],
    say: Callable[[str], None],
    result: RowResult,
    *,
    tool: str,
) -> None:
    """trains: `verl-setup smoke` in the installed env (2 GRPO steps of verl's own main_ppo). The cpu
    row trains on the CPU here; a GPU row only on a GPU host (VERL_SETUP_PROVE_GPUS=N, which the
    GPU host's script sets), and the step records the host it ran on."""
    gpus = int(env.get("VERL_SETUP_PROVE_GPUS") or 0)
    if env.get("VERL_SETUP_PROVE_TRAINS") == "0":
        result.stopped = "trains: left out (VERL_SETUP_PROVE_TRAINS=0)"
        return
    if row.requires.gpu and gpus == 0:
        result.stopped = "trains needs a GPU host for this row: run .ci/gpu-smoke there"
        return
    say(
        f"{row.id}: trains (verl-setup smoke: 2 GRPO steps of verl's main_ppo, "
        + (f"{gpus} GPUs)" if gpus else "CPU)")
    )
    argv = ["smoke", "--prefix", str(prefix), "--json", *(["--gpus", str(gpus)] if row.requires.gpu else [])]
    code, out, err, seconds = _cli(argv, env)
    result.seconds["trains"] = round(seconds, 1)
    data = (json.loads(out).get("data") or {}) if out.strip().startswith("{") else {}
    if code != 0 or not data.get("ok"):
        stage = data.get("failed_stage")
        result.failed = (
            f"trains: stage {stage}: {data.get('failure')}" if stage else f"trains: {_last_error(err)}"
        )
        return
    checks = {c["name"]: c["summary"] for c in data["checks"]}
    result.steps["trains"] = ProofStep(
        date=today(),
        tool=tool,
        detail={
            "path": data["path"],
            "host": _host_words(gpus, env),
            "seconds": data["seconds"],
            "stages": {s["stage"]: s["seconds"] for s in data["stages"]},
            "peak_pss_mib": data["peak_memory"]["pss_bytes"] // 2**20,
            "checks": checks,
        },
    )


def _host_words(gpus: int, env: Mapping[str, str]) -> str:
    """Where a trains step ran: CPUs here, or the GPUs the GPU host's script named."""
    if gpus:
        return f"{gpus} x {env.get('VERL_SETUP_PROVE_GPU_NAME') or 'GPU'} ({platform.node()})"
    return f"CPU only: {online_cpus()} cores, {platform.machine()} ({platform.node()})"


def _floor(
    row: Row, matrix: Matrix, resolved: Mapping[str, tuple[str, str]], env: Mapping[str, str]
) -> tuple[Floor | None, str]:
    """The glibc floor of the wheels resolved, or None and why it is no proof (not computed, or
    above the row's requires.glibc)."""
    try:
        index = default_index(find_uv(), uv_env(base=env))
        floor = row_floor(row, matrix, {n: v for n, (v, _) in resolved.items()}, index)
    except InstallError as exc:
        return None, f"the glibc floor of its wheels could not be computed: {exc}"
    above = floor_above(row, floor)
    return (floor, "") if above is None else (None, above)


def _left_out_flags(row: Row, matrix: Matrix, env: Mapping[str, str]) -> list[str]:
    """--without for every package built against torch, except those VERL_SETUP_PROVE_WITH names
    (comma-separated: they come from the configured wheel sources, as install takes them), and for
    a git source (git hosts are out of reach on this project's machines) unless
    VERL_SETUP_PROVE_GIT=1; each is recorded so."""
    kept = {name.strip() for name in env.get("VERL_SETUP_PROVE_WITH", "").split(",") if name.strip()}
    names = [name for name in matrix.rows_file.torch_extensions if name in row.packages and name not in kept]
    if env.get("VERL_SETUP_PROVE_GIT") != "1":
        names += [name for name, url in row.sources.items() if url.startswith("git+")]
    return [flag for name in names for flag in ("--without", name)]


def _git_source(prefix: Path, name: str, url: str, env: Mapping[str, str]) -> dict[str, str]:
    """The commit a git source installed at (its direct_url.json), and where git fetched it from
    when git's url.insteadOf rewrote the row's URL (a local mirror: the proof must say so)."""
    if not url.startswith("git+"):
        return {}
    found: dict[str, str] = {}
    pattern = f"lib/python*/site-packages/{name.replace('-', '_')}-*.dist-info/direct_url.json"
    for info in prefix.glob(pattern):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            commit = (json.loads(info.read_text(encoding="utf-8")).get("vcs_info") or {}).get("commit_id")
            if isinstance(commit, str):
                found["commit"] = commit
    remote = url.removeprefix("git+").rsplit("@", 1)[0]
    with contextlib.suppress(ProgramError):
        served = run(["git", "ls-remote", "--get-url", remote], timeout=10, env=env).stdout.strip()
        if served and served != remote:
            found["served_from"] = served
    return found


def _size_mib(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size  # noqa: PTH118  # fast walk
    return total // 2**20


def table(results: Sequence[RowResult]) -> str:
    """The row, resolves, installs, imports table with the seconds of each step."""

    def cell(r: RowResult, level: str) -> str:
        if level in r.steps:
            return f"ok {r.seconds.get(level, 0):.0f}s"
        if r.failed and r.failed.startswith(level):
            return f"FAIL {r.seconds.get(level, 0):.0f}s"
        return "-"

    lines = [f"{'row':<28} {'resolves':<10} {'installs':<10} {'imports':<10} {'trains':<10} gpu"]
    for r in results:
        lines.append(
            f"{r.row:<28} {cell(r, 'resolves'):<10} {cell(r, 'installs'):<10} {cell(r, 'imports'):<10} "
            f"{cell(r, 'trains'):<10} - (needs a GPU host)"
        )
        if r.failed:
            lines.append(f"    failed: {r.failed}")
        if r.skipped:
            lines.append(f"    skipped: {r.skipped}")
        if r.stopped:
            lines.append(f"    not further here: {r.stopped}")
    return "\n".join(lines) + "\n"


def command(
    row_ids: Sequence[str],
    matrix: Matrix,
    *,
    json_out: bool,
    keep_record: bool,
    out: TextIO,
    quiet: bool = False,
) -> int:
    """Prove the rows (all when none are named); exit 5 if any failed."""
    rows = [matrix.row(r) for r in row_ids] if row_ids else list(matrix.rows)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("VERL_SETUP_") or k.startswith("VERL_SETUP_PROVE")
    }
    progress = Progress(quiet=quiet)

    book, results = matrix.proof, []
    with tempfile.TemporaryDirectory(prefix="verl-setup-prove-") as tmp:
        for row in rows:
            result = prove_row(row, matrix, Path(tmp), env, progress.say)
            results.append(result)
            if keep_record and not result.skipped:
                book = record(book, row, result.steps, result.failed, result.stopped)
            if keep_record and result.resolution is not None:
                closure = with_targets(
                    result.resolution, row, matrix, uv=find_uv(), env=env, say=progress.say
                )
                record_resolved(matrix.path, {row.id: closure})
    failed = [r.row for r in results if r.failed]
    error = (
        CheckFailedError(f"{len(failed)} of {len(results)} rows failed a proof step: {', '.join(failed)}")
        if failed
        else None
    )
    if json_out:
        emit(out, "matrix prove", {"rows": [r.to_json() for r in results]}, error)
    else:
        out.write(table(results))
        out.write(
            "gpu: set only by a run on a GPU host (detect, doctor and the import probe there); none here\n"
        )
    if error is not None:
        raise error
    return 0

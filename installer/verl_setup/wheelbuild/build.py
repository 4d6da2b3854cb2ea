"""`wheelhouse build`: each torch extension a row installs, compiled once against the row's exact
torch in a scratch environment and added to a wheelhouse folder (util/wheelhouse.py's layout).

A wheel already there for the same name, version, torch, Python tag and platform is kept, so a
second run (or another node pointed at the folder) builds nothing. The scratch environment is
removed afterwards; a failed build leaves the folder as it was and its log beside it.
"""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from verl_setup.environment.abi import installed_torch
from verl_setup.environment.python_choice import choose_python
from verl_setup.environment.uv import index_flags, uv_env
from verl_setup.errors import BadInputError, InstallError
from verl_setup.host.pythons import detect_pythons
from verl_setup.output import Progress
from verl_setup.plan.build_host import build_jobs
from verl_setup.plan.make import PlanInputs
from verl_setup.plan.select import Plan
from verl_setup.util.runner import ProgramError, follow, run
from verl_setup.util.uvbin import find_uv
from verl_setup.util.versions import minor_of
from verl_setup.util.vocab import suggest
from verl_setup.util.wheelhouse import Manifest, Wheelhouse, add_build_record, sha256_of
from verl_setup.wheelbuild.source import fetch_source
from verl_setup.wheelbuild.toolkit import Toolkit, host_toolkit, pypi_requirements, pypi_toolkit

BUILD_TIMEOUT_S = 8 * 3600  # flash-attn on few cores takes hours
SETUP_TIMEOUT_S = 1800
NvccChoice = Literal["auto", "host", "pypi"]


@dataclass(frozen=True, kw_only=True)
class WheelhouseRequest:
    """`wheelhouse build` as asked: the plan flags, the folder, what to build and how."""

    inputs: PlanInputs
    out: Path
    only: tuple[str, ...] = ()
    sources: Mapping[str, str] = field(default_factory=dict)
    arch_list: str | None = None
    jobs: int | None = None
    nvcc: NvccChoice = "auto"
    keep_scratch: bool = False


@dataclass(frozen=True, kw_only=True)
class BuildOptions(WheelhouseRequest):
    """The request with its plan made (what every build step reads)."""

    plan: Plan


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """One extension: built now, or already in the wheelhouse."""

    name: str
    version: str
    status: Literal["built", "present"]
    wheel: Path
    seconds: float = 0.0
    log: Path | None = None

    def to_json(self) -> dict[str, Any]:
        """As plain data."""
        return {
            "name": self.name,
            "version": self.version,
            "status": self.status,
            "wheel": str(self.wheel),
            "seconds": round(self.seconds, 1),
            "log": None if self.log is None else str(self.log),
        }


def row_extensions(plan: Plan, only: tuple[str, ...]) -> list[tuple[str, str]]:
    """(name, version) of the torch extensions the row installs, limited to `only` when given."""
    facts = plan.matrix.rows_file.torch_extensions
    present = [(n, plan.row.packages[n]) for n in facts if n in plan.row.packages]
    for name in only:
        if name not in facts:
            raise BadInputError(f"--only {name!r}: not a package built against torch{suggest(name, facts)}")
        if name not in plan.row.packages:
            raise BadInputError(f"--only {name}: row {plan.row.id} does not install {name}")
    return [p for p in present if not only or p[0] in only]


def arch_list(plan: Plan, explicit: str | None) -> tuple[str, ...]:
    """TORCH_CUDA_ARCH_LIST: given; else the target's GPUs; else the row's compute-capability range."""
    if explicit:
        return tuple(explicit.replace(",", ";").replace(" ", ";").strip(";").split(";"))
    gpus = sorted({g.compute_capability for g in plan.target.gpus.value}, key=_cc_key)
    if gpus:
        return tuple(gpus)
    cc, cuda = plan.row.requires.compute_capability, plan.row.torch.cuda or "0"
    known = sorted(plan.matrix.cuda.facts.architectures, key=_cc_key)
    chosen = [
        a
        for a in known
        if (cc is None or _cc_key(cc.min) <= _cc_key(a) <= _cc_key(cc.max))
        and _cc_key(plan.matrix.cuda.facts.architectures[a].first_cuda) <= _cc_key(cuda)
    ]
    if not chosen:
        raise BadInputError(f"row {plan.row.id}: no GPU architecture to build for; give --arch-list")
    return (*chosen[:-1], chosen[-1] + "+PTX")  # PTX of the newest runs on GPUs newer still


def _cc_key(cc: str) -> tuple[int, ...]:
    return tuple(int(p) for p in cc.split("+", maxsplit=1)[0].split("."))


def max_jobs(explicit: int | None) -> int:
    """MAX_JOBS: given, else the cores, at most one job per GIB_PER_BUILD_JOB GiB of memory."""
    return explicit or build_jobs()


@dataclass(frozen=True, kw_only=True)
class WheelhouseReport:
    """What was built and kept, for the planned row."""

    row: str
    out: Path
    outcomes: list[Outcome]

    def to_json(self) -> dict[str, Any]:
        """The --json data."""
        return {"row": self.row, "out": str(self.out), "wheels": [o.to_json() for o in self.outcomes]}


def build_wheelhouse_for(
    request: WheelhouseRequest, env: Mapping[str, str], progress: Progress
) -> WheelhouseReport:
    """`wheelhouse build`'s use case: plan, then build what the folder lacks for the row."""
    from verl_setup.plan.make import make_plan  # noqa: PLC0415

    options = BuildOptions(**vars(request), plan=make_plan(request.inputs, env))
    outcomes = build_wheelhouse(options, env, progress)
    return WheelhouseReport(row=options.plan.row.id, out=options.out, outcomes=outcomes)


def build_wheelhouse(options: BuildOptions, env: Mapping[str, str], progress: Progress) -> list[Outcome]:
    """Build what the wheelhouse lacks for the plan's row; keep what it has."""
    plan, row = options.plan, options.plan.row
    progress.step(
        "plan", f"row {row.id}: torch {row.torch.version} (CUDA {row.torch.cuda}), Python {plan.python}"
    )
    if row.torch.cuda is None:
        raise BadInputError(f"row {row.id} has a CPU torch: it has no CUDA extensions to build")
    house = Wheelhouse(options.out)
    py_tag = "cp" + minor_of(plan.python).replace(".", "")
    wheel_platform = f"linux_{plan.target.arch.value or platform.machine()}"
    wanted, outcomes = [], []
    for name, version in row_extensions(plan, options.only):
        have = [
            e
            for e in house.find(name, torch=row.torch.version, python=py_tag, platform=wheel_platform)
            if e.manifest.version == version
        ]
        if have:
            progress.step(
                name, f"{name} {version} for torch {row.torch.version}, {py_tag}: in the wheelhouse"
            )
            outcomes.append(Outcome(name=name, version=version, status="present", wheel=have[0].wheel))
        else:
            wanted.append((name, version))
    if not wanted:
        return outcomes
    for name, given in options.sources.items():  # a typo fails before minutes of set-up
        if name not in dict(wanted) and name not in dict(row_extensions(plan, ())):
            raise BadInputError(f"--source {name}=...: row {row.id} builds no {name}")
        if "://" not in given and not Path(given).expanduser().exists():
            raise BadInputError(f"--source {name}={given}: no such file or folder")
    archs, jobs = arch_list(plan, options.arch_list), max_jobs(options.jobs)
    options.out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".scratch-", dir=options.out))
    try:
        python, toolkit = _scratch_env(options, scratch, env, progress)
        ctx = _Context(
            options=options, house=house, python=python, toolkit=toolkit, archs=archs, jobs=jobs, env=env,
            progress=progress,
        )  # fmt: skip
        outcomes.extend(_build_one(ctx, name, version) for name, version in wanted)
    finally:
        if options.keep_scratch:
            progress.say(f"scratch environment kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return outcomes


def _scratch_env(
    options: BuildOptions, scratch: Path, env: Mapping[str, str], progress: Progress
) -> tuple[Path, Toolkit]:
    plan, row = options.plan, options.plan.row
    uv, uvenv = find_uv(), uv_env(base=env)
    found = detect_pythons(env.get("PATH", os.defpath), Path(env.get("HOME") or Path.home()), dict(env))
    # Only the wheel's Python tag matters for a build: the same minor will do (no download).
    choice = choose_python(plan.python, found, downloads=False)
    venv = scratch / "env"
    progress.step("scratch", f"Python {choice.version} ({choice.request}), torch {row.torch.version}")
    _uv([uv, "venv", "-q", "--python", choice.request, str(venv)], uvenv)
    python = venv / "bin" / "python"
    facts = plan.matrix.rows_file.torch_extensions
    build_requires = sorted(
        {r for n, _ in row_extensions(plan, options.only) for r in facts[n].build_requires}
    )
    torch_pins = [f"torch=={row.torch.version}"]

    def pip_install(*requirements: str) -> None:  # torch pinned again, so nothing moves it
        argv = [uv, "pip", "install", "-q", "--python", str(python), *torch_pins, *requirements]
        _uv([*argv, *index_flags(plan.index_url)], uvenv)

    pip_install(*build_requires)
    site = installed_site(python)
    cuda = row.torch.cuda or ""
    toolkit = None if options.nvcc == "pypi" else host_toolkit(cuda, env)
    if toolkit is None and options.nvcc == "host":
        raise InstallError(
            f"--nvcc host: no CUDA {cuda.split('.')[0]}.x toolkit here (CUDA_HOME, PATH, /usr/local/cuda)"
        )
    if toolkit is None:
        torch = installed_torch(site)
        requires = _requires(site)
        extra = pypi_requirements(requires, row.torch.version)
        major = cuda.split(".")[0]
        why = "--nvcc pypi" if options.nvcc == "pypi" else f"no CUDA {major}.x toolkit on this host"
        progress.step("nvcc", f"{why}: {' '.join(extra)} from the index")
        pip_install(*extra)
        toolkit = pypi_toolkit(site, torch.cuda if torch and torch.cuda else cuda, env)
    progress.step("nvcc", f"nvcc {toolkit.version} from {toolkit.source}")
    return python, toolkit


def installed_site(python: Path) -> Path:
    """The scratch venv's site-packages."""
    found = sorted((python.parent.parent / "lib").glob("python3*/site-packages"))
    if not found:
        raise InstallError(f"{python}: no site-packages folder in its venv")
    return found[0]


def _requires(site: Path) -> list[str]:
    infos = sorted(site.glob("torch-*.dist-info"))
    text = (infos[-1] / "METADATA").read_text(errors="replace") if infos else ""
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def _uv(argv: list[str], env: Mapping[str, str]) -> None:
    try:
        done = run(argv, timeout=SETUP_TIMEOUT_S, env=env)
    except ProgramError as exc:
        raise InstallError(f"preparing the scratch environment failed: {exc}") from exc
    if done.returncode:
        from verl_setup.environment.uv import uv_error  # noqa: PLC0415

        raise InstallError(f"preparing the scratch environment failed: {uv_error(done.stderr)}")


@dataclass(frozen=True, kw_only=True)
class _Context:
    """What every build of one run shares."""

    options: BuildOptions
    house: Wheelhouse
    python: Path
    toolkit: Toolkit
    archs: tuple[str, ...]
    jobs: int
    env: Mapping[str, str]
    progress: Progress


def _build_one(ctx: _Context, name: str, version: str) -> Outcome:
    options, python, toolkit, archs, env, progress = (
        ctx.options, ctx.python, ctx.toolkit, ctx.archs, ctx.env, ctx.progress
    )  # fmt: skip
    plan = options.plan
    facts = plan.matrix.rows_file.torch_extensions[name]
    work = python.parent.parent.parent / f"build-{name}"
    work.mkdir()
    source = fetch_source(name, version, facts, given=options.sources.get(name), work=work, env=env)
    dist = work / "dist"
    build_env = toolkit.env(uv_env(base=env)) | {
        "TORCH_CUDA_ARCH_LIST": ";".join(archs),
        "MAX_JOBS": str(ctx.jobs),
        **facts.build_env,
    }
    argv = [
        find_uv(),
        "build",
        "--wheel",
        "--no-build-isolation",
        "--python",
        str(python),
        "--out-dir",
        str(dist),
    ]
    argv += [f"--config-setting={s}" for s in facts.config_settings]
    log = options.out / f"build-{name}-{version}.log"
    progress.step(
        name,
        f"building {name} {version} against torch {plan.row.torch.version}: TORCH_CUDA_ARCH_LIST="
        f"{';'.join(archs)}, MAX_JOBS={ctx.jobs} (log: {log})",
    )
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as handle:

        def on_line(line: str) -> None:
            handle.write(line + "\n")
            shown = line.strip()
            if shown:
                elapsed = time.monotonic() - started
                progress.status(f"{name}: {elapsed / 60:.0f} min, {shown[:120]}")

        try:
            code = follow([*argv, str(source.path)], timeout=BUILD_TIMEOUT_S, on_line=on_line, env=build_env)
        except ProgramError as exc:
            raise InstallError(f"building {name} {version} failed: {exc} (log: {log})") from exc
    progress.end_line()
    wheels = sorted(dist.glob("*.whl")) if dist.is_dir() else []
    if code != 0 or not wheels:
        raise InstallError(f"building {name} {version} failed (exit {code}); the last lines are in {log}")
    wheel = wheels[0]
    torch = installed_torch(installed_site(python))
    cuda, abi = (torch.cuda if torch else plan.row.torch.cuda), bool(torch and torch.cxx11abi)
    record = {"torch": plan.row.torch.version, "cuda": cuda, "abi": abi, "arch_list": list(archs)}
    add_build_record(wheel, {**record, "source_sha256": source.ref.sha256})
    seconds = time.monotonic() - started
    manifest = Manifest(
        name=name,
        version=version,
        torch=plan.row.torch.version,
        cuda=cuda,
        python="cp" + minor_of(plan.python).replace(".", ""),
        abi=abi,
        arch_list=archs,
        platform=wheel.name.rsplit("-", 1)[-1].removesuffix(".whl"),
        source=source.ref,
        sha256=sha256_of(wheel),
        built_at=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        built_with={"nvcc": toolkit.version, "nvcc_source": toolkit.source, "compiler": _compiler(env)},
    )
    entry = ctx.house.add(wheel, manifest)
    progress.step(name, f"built {entry.wheel.name} in {seconds / 60:.1f} min")
    return Outcome(name=name, version=version, status="built", wheel=entry.wheel, seconds=seconds, log=log)


def _compiler(env: Mapping[str, str]) -> str | None:
    cxx = env.get("CXX") or shutil.which("c++", path=env.get("PATH", os.defpath))
    if not cxx:
        return None
    try:
        out = run([cxx, "--version"], timeout=30, env=env)
    except ProgramError:
        return None
    return out.stdout.splitlines()[0].strip() if out.stdout else None

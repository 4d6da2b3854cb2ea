"""Plan -> Recipe: the one ordered install procedure, as typed steps.

`install` executes it; `render venv` prints it as a shell script and `render docker` as a
Dockerfile. Order: the venv with the exact Python, torch from its index, the engine and its
companions (torch pinned again so nothing moves it), flash-attn in a step of its own (it must be
built against the installed torch: a matching prebuilt wheel, or a build on request), then verl
with every pin again, then verify. A new step is written here once.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packaging.version import Version

from verl_setup.errors import InstallError
from verl_setup.matrix.schema import FlashAttnFacts, Row
from verl_setup.plan.select import Plan
from verl_setup.util.versions import parse_minor

StepName = Literal["torch", "engine", "flash-attn-build-requires", "flash-attn", "verl"]
FlashAttnRequest = Literal["auto", "build", "without"]
TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
GIB_PER_BUILD_JOB = 4  # flash-attention README: MAX_JOBS=4 on machines with less than 96 GB of RAM


@dataclass(frozen=True, kw_only=True)
class FlashAttnPlan:
    """How flash-attn gets in: a prebuilt wheel, a build against the installed torch, or not at all."""

    version: str
    mode: Literal["wheel", "build", "without"]
    reason: str
    url: str | None = None
    sha256: str | None = None
    cxx11abi: bool | None = None
    max_jobs: int | None = None


@dataclass(frozen=True, kw_only=True)
class Step:
    """One `uv pip install` of a recipe: what, from where, and with which resolver options."""

    name: StepName
    title: str
    requirements: tuple[str, ...]
    index_url: str | None = None
    overrides: bool = False
    no_build_isolation: bool = False
    env: tuple[tuple[str, str], ...] = ()

    def pip_args(self, overrides_file: str) -> list[str]:
        """Everything after `uv pip install --python PY`: the same in all three renderings."""
        args = list(self.requirements)
        if self.index_url is not None:
            args += ["--extra-index-url", self.index_url, "--index-strategy", "unsafe-best-match"]
        if self.overrides:
            args += ["--override", overrides_file]
        if self.no_build_isolation:
            args.append("--no-build-isolation")
        return args


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """The ordered install of one row for one exact Python."""

    row: Row
    python: str
    overrides: tuple[str, ...]
    steps: tuple[Step, ...]
    flash_attn: FlashAttnPlan | None
    verify_pins: tuple[str, ...] = field(default=())
    warnings: tuple[str, ...] = ()

    def step(self, name: StepName) -> Step | None:
        """The step of that name, if the recipe has one."""
        return next((s for s in self.steps if s.name == name), None)


def build_recipe(
    plan: Plan,
    *,
    flash_attn: FlashAttnRequest = "auto",
    nvcc_version: str | None = None,
    cores: int | None = None,
    memory_gib: float | None = None,
) -> Recipe:
    """The recipe for a plan; InstallError (before anything changes) when flash-attn has no way in."""
    row = plan.row
    reqs = row.requirements()
    torch_reqs = tuple(r for r in reqs if _name(r) in TORCH_FAMILY)
    verl_req = reqs[0]
    rest = tuple(r for r in reqs[1:] if _name(r) not in (*TORCH_FAMILY, "flash-attn"))
    index, overrides = plan.index_url, bool(row.overrides)
    steps = [
        Step(
            name="torch",
            title=f"torch {row.torch.version}" + (f" (CUDA {row.torch.cuda})" if row.torch.cuda else ""),
            requirements=torch_reqs,
            index_url=index,
            overrides=overrides,
        ),
    ]
    if rest:
        engine = "the engine and its companions" if row.engine.name != "none" else "the companions"
        steps.append(
            Step(
                name="engine",
                title=engine,
                requirements=torch_reqs + rest,
                index_url=index,
                overrides=overrides,
            )
        )
    fa = _flash_attn_plan(plan, flash_attn, nvcc_version, cores, memory_gib)
    warnings: list[str] = []
    if fa is not None and fa.mode == "wheel":
        assert fa.url is not None  # noqa: S101  # a wheel plan always has its URL
        steps.append(
            Step(
                name="flash-attn",
                title=f"flash-attn {fa.version} ({fa.reason})",
                requirements=(*torch_reqs, f"flash-attn @ {fa.url}"),
                index_url=index,
            )
        )
    elif fa is not None and fa.mode == "build":
        facts = plan.matrix.rows_file.flash_attn
        build_requires = facts.build_requires if facts else ()
        steps.append(
            Step(
                name="flash-attn-build-requires",
                title="what flash-attn's setup.py needs, since it builds without isolation",
                requirements=(*torch_reqs, *build_requires),
                index_url=index,
            )
        )
        steps.append(
            Step(
                name="flash-attn",
                title=f"flash-attn {fa.version} (built against the installed torch)",
                requirements=(*torch_reqs, f"flash-attn=={fa.version}"),
                index_url=index,
                no_build_isolation=True,
                env=(("MAX_JOBS", str(fa.max_jobs)),),
            )
        )
        warnings.append(f"flash-attn {fa.version}: {fa.reason}")
    elif fa is not None:
        warnings.append(f"flash-attn {fa.version} left out (--without flash-attn): {fa.reason}")
    steps.append(
        Step(
            name="verl",
            title=f"verl {row.verl.version}, with every pin again so nothing drifts",
            requirements=(verl_req, *torch_reqs, *rest),
            index_url=index,
            overrides=overrides,
        )
    )
    verify = [r for r in reqs if _name(r) != "flash-attn"]
    if fa is not None and fa.mode != "without":
        verify.append(f"flash-attn=={fa.version}")
    return Recipe(
        row=row,
        python=plan.python,
        overrides=row.overrides,
        steps=tuple(steps),
        flash_attn=fa,
        verify_pins=tuple(verify),
        warnings=tuple(warnings),
    )


def _name(requirement: str) -> str:
    """The distribution a requirement line names (`verl[vllm]==0.9.1`, `flash-attn @ URL`)."""
    return re.split(r"[\[=@ ;]", requirement, maxsplit=1)[0]


def _flash_attn_plan(
    plan: Plan,
    request: FlashAttnRequest,
    nvcc_version: str | None,
    cores: int | None,
    memory_gib: float | None,
) -> FlashAttnPlan | None:
    row = plan.row
    version = row.packages.get("flash-attn")
    if version is None:
        return None
    facts = plan.matrix.rows_file.flash_attn
    without = without_flash_attn(facts, row.verl.version)
    if request == "without":
        return FlashAttnPlan(version=version, mode="without", reason=without)
    wheel, why_not = wheel_for(facts, row, version, plan.python, plan.target.glibc.value)
    if wheel is not None and request == "auto":
        url, sha256, abi, reason = wheel
        return FlashAttnPlan(
            version=version, mode="wheel", reason=reason, url=url, sha256=sha256, cxx11abi=abi
        )
    if request == "build":
        return _build_plan(row, version, nvcc_version, cores, memory_gib)
    raise InstallError(
        f"flash-attn {version} cannot be installed as it stands ({why_not}): pass --build-flash-attn to "
        f"compile it against torch {row.torch.version} after torch is installed (needs nvcc "
        f"{row.torch.cuda}, an hour or more), or --without flash-attn ({without}); nothing was changed"
    )


def _build_plan(
    row: Row, version: str, nvcc_version: str | None, cores: int | None, memory_gib: float | None
) -> FlashAttnPlan:
    cuda = row.torch.cuda
    if cuda is None:
        raise InstallError(f"flash-attn {version} cannot be built for row {row.id}: its torch has no CUDA")
    if nvcc_version is None:
        raise InstallError(
            f"--build-flash-attn needs nvcc of CUDA {cuda} (CUDA_HOME/bin/nvcc or on PATH) and none was "
            "found: install the CUDA toolkit, or use --without flash-attn; nothing was changed"
        )
    if nvcc_version.split(".")[0] != cuda.split(".")[0]:
        raise InstallError(
            f"--build-flash-attn: nvcc is CUDA {nvcc_version}, torch {row.torch.version} is built with "
            f"CUDA {cuda}; torch refuses to build extensions across CUDA majors. Put a CUDA "
            f"{cuda.split('.')[0]}.x toolkit first on PATH (or CUDA_HOME); nothing was changed"
        )
    jobs = max(
        1, min(cores or os.cpu_count() or 1, int((memory_gib or GIB_PER_BUILD_JOB) // GIB_PER_BUILD_JOB))
    )
    reason = (
        f"built from source with nvcc {nvcc_version} and MAX_JOBS={jobs} (from the cores and "
        f"{GIB_PER_BUILD_JOB} GiB of memory per job); this takes an hour or more"
    )
    return FlashAttnPlan(version=version, mode="build", reason=reason, max_jobs=jobs)


def without_flash_attn(facts: FlashAttnFacts | None, verl_version: str) -> str:
    """What a run of this verl line can do without flash-attn (read from its code; matrix data)."""
    if facts is not None:
        release = Version(verl_version).release
        for size in (2, 1):
            key = ".".join(str(p) for p in release[:size])
            if key in facts.without:
                return facts.without[key]
    return "check the verl version's FSDP settings: attn_implementation and use_remove_padding"


def wheel_for(  # noqa: PLR0911  # one return per reason a wheel does not fit
    facts: FlashAttnFacts | None, row: Row, version: str, python: str, glibc: str | None
) -> tuple[tuple[str, str | None, bool, str] | None, str]:
    """((url, sha256, cxx11abi, reason), "") for a matching prebuilt wheel, else (None, why not)."""
    if facts is None:
        return None, "the matrix lists no prebuilt flash-attn wheels"
    release = facts.releases.get(version)
    torch_minor = ".".join(row.torch.version.split("+")[0].split(".")[:2])
    cuda_major = row.torch.cuda.split(".")[0] if row.torch.cuda else None
    arch = row.requires.arch[0]
    if release is None:
        return None, f"flash-attn {version} published no prebuilt wheels"
    if torch_minor not in release.torch:
        return None, f"flash-attn {version} published no wheel for torch {torch_minor}"
    if cuda_major is None or cuda_major not in release.cuda_majors:
        return None, f"flash-attn {version} published no wheel for CUDA {cuda_major}"
    if arch not in release.arch:
        return None, f"flash-attn {version} published no {arch} wheel"
    minor = ".".join(python.split(".")[:2])
    if minor not in release.python:
        return None, f"flash-attn {version} published no wheel for Python {minor}"
    if glibc is not None and parse_minor(glibc, "glibc") < parse_minor(release.glibc, "glibc"):
        return None, f"its prebuilt wheels need glibc >= {release.glibc} and the target has {glibc}"
    abi = Version(torch_minor) >= Version(facts.cxx11abi_from_torch)
    py = "cp" + "".join(python.split(".")[:2])
    url = facts.url.format(
        version=version,
        cuda_major=cuda_major,
        torch_minor=torch_minor,
        abi=str(abi).upper(),
        py=py,
        arch=arch,
    )
    sha256 = facts.sha256.get(url.rsplit("/", 1)[-1])
    reason = f"prebuilt for torch {torch_minor}, CUDA {cuda_major}, {py}, C++11 ABI {str(abi).upper()}"
    return (url, sha256, abi, reason), ""


def recipe_for(plan: Plan, request: FlashAttnRequest, env: Mapping[str, str]) -> Recipe:
    """The plan's recipe; a build request measures nvcc, cores and memory first."""
    if request != "build":
        return build_recipe(plan, flash_attn=request)
    return build_recipe(
        plan,
        flash_attn=request,
        nvcc_version=nvcc_version(env),
        cores=os.cpu_count(),
        memory_gib=_memory_gib(),
    )


def nvcc_version(env: Mapping[str, str]) -> str | None:
    """The CUDA release of the nvcc a build would use (CUDA_HOME's, else PATH's), e.g. "13.0"."""
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    home = env.get("CUDA_HOME") or env.get("CUDA_PATH")
    nvcc = str(Path(home) / "bin" / "nvcc") if home and (Path(home) / "bin" / "nvcc").exists() else None
    nvcc = nvcc or shutil.which("nvcc", path=env.get("PATH", os.defpath))
    if nvcc is None:
        return None
    try:
        out = run([nvcc, "--version"], timeout=30, env=env)
    except ProgramError:
        return None
    found = re.search(r"release (\d+\.\d+)", out.stdout)
    return found[1] if found else None


def _memory_gib() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return None

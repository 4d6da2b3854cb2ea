"""Plan -> Recipe: the one ordered install procedure, as typed steps.

`install` executes it; `render venv` prints it as a shell script and `render docker` as a
Dockerfile. Order: the venv with the exact Python, torch from its index, the engine and its
companions (torch pinned again so nothing moves it), each package built against torch (flash-attn,
TransformerEngine's torch module, apex) in a step of its own (a matching prebuilt wheel, or a
build on request, or left out), then verl with every pin again, then verify. A new step is
written here once.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from packaging.version import Version

from verl_setup.errors import BadInputError, InstallError
from verl_setup.matrix.schema import ExtensionFacts, Row
from verl_setup.plan.build_host import memory_gib, nvcc_version
from verl_setup.plan.select import Plan
from verl_setup.util.binary import binary_only
from verl_setup.util.versions import parse_minor
from verl_setup.util.vocab import suggest

# "torch", "engine", "verl", and per package built against torch "<name>" and "<name>-build-requires".
StepName = str
Choice = Literal["auto", "build", "without"]
# What the user asked per package built against torch (--build NAME, --without NAME); absent: auto.
ExtensionRequests = Mapping[str, Choice]
FlashAttnRequest = Choice
TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
GIB_PER_BUILD_JOB = 4  # flash-attention README: MAX_JOBS=4 on machines with less than 96 GB of RAM


@dataclass(frozen=True, kw_only=True)
class ExtensionPlan:
    """How one package built against torch gets in: a prebuilt wheel, a build, or not at all."""

    name: str
    version: str
    mode: Literal["wheel", "build", "without"]
    reason: str
    url: str | None = None
    sha256: str | None = None
    cxx11abi: bool | None = None
    max_jobs: int | None = None

    @property
    def requirement(self) -> str:
        """What the step installs."""
        return f"{self.name} @ {self.url}" if self.mode == "wheel" else f"{self.name}=={self.version}"


FlashAttnPlan = ExtensionPlan


@dataclass(frozen=True, kw_only=True)
class Step:
    """One `uv pip install` of a recipe: what, from where, and with which resolver options."""

    name: StepName
    title: str
    requirements: tuple[str, ...]
    index_url: str | None = None
    overrides: bool = False
    no_build_isolation: bool = False
    config_settings: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # Wheels only, except these sdists (the row's `sdists`, and the package a build step builds).
    sdists: tuple[str, ...] = ()

    def pip_args(self, overrides_file: str) -> list[str]:
        """Everything after `uv pip install --python PY`: the same in all three renderings."""
        args = list(self.requirements)
        if self.index_url is not None:
            args += ["--extra-index-url", self.index_url, "--index-strategy", "unsafe-best-match"]
        if self.overrides:
            args += ["--override", overrides_file]
        args += binary_only(self.sdists)
        if self.no_build_isolation:
            args.append("--no-build-isolation")
        for setting in self.config_settings:
            args += ["--config-settings", setting]
        return args


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """The ordered install of one row for one exact Python."""

    row: Row
    python: str
    overrides: tuple[str, ...]
    steps: tuple[Step, ...]
    extensions: tuple[ExtensionPlan, ...] = ()
    verify_pins: tuple[str, ...] = field(default=())
    warnings: tuple[str, ...] = ()
    sdists: tuple[str, ...] = ()  # built from their sdist on purpose; everything else is a wheel

    def step(self, name: StepName) -> Step | None:
        """The step of that name, if the recipe has one."""
        return next((s for s in self.steps if s.name == name), None)

    def extension(self, name: str) -> ExtensionPlan | None:
        """The plan of one package built against torch, if the row has it."""
        return next((e for e in self.extensions if e.name == name), None)

    @property
    def flash_attn(self) -> ExtensionPlan | None:
        """flash-attn's plan, if the row has flash-attn."""
        return self.extension("flash-attn")


def build_recipe(
    plan: Plan,
    *,
    extensions: ExtensionRequests | None = None,
    flash_attn: Choice | None = None,
    nvcc_version: str | None = None,
    cores: int | None = None,
    memory_gib: float | None = None,
) -> Recipe:
    """The recipe for a plan; InstallError (before anything changes) when a package built against
    torch has no way in, BadInputError when --build/--without names a package the row lacks."""
    row = plan.row
    facts = plan.matrix.rows_file.torch_extensions
    asked = dict(extensions or {})
    if flash_attn is not None:
        asked["flash-attn"] = flash_attn
    _check_names(asked, row, facts)
    reqs = row.requirements()
    torch_reqs = tuple(r for r in reqs if _name(r) in TORCH_FAMILY)
    verl_req = reqs[0]
    measured = _Measured(nvcc_version, cores, memory_gib)
    plans = [
        _extension_plan(plan, name, ext, asked.get(name, "auto"), measured)
        for name, ext in facts.items()
        if name in row.packages
    ]
    # A package left out takes its companions with it (a TransformerEngine without its torch
    # module breaks `import megatron.core`).
    dropped = {c for e in plans if e.mode == "without" for c in facts[e.name].companions}
    rest = tuple(r for r in reqs[1:] if _name(r) not in (*TORCH_FAMILY, *facts, *dropped))
    index, overrides = plan.index_url, bool(row.overrides)
    sdists = plan.matrix.rows_file.built_from_sdist(row)
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
    warnings: list[str] = []
    for ext in plans:
        new_steps, warning = _extension_steps(ext, facts[ext.name], torch_reqs, index)
        steps += new_steps
        warnings += [warning] if warning else []
    steps.append(
        Step(
            name="verl",
            title=f"verl {row.verl.version}, with every pin again so nothing drifts",
            requirements=(verl_req, *torch_reqs, *rest),
            index_url=index,
            overrides=overrides,
        )
    )
    verify = [r for r in reqs if _name(r) not in (*facts, *dropped)]
    verify += [f"{e.name}=={e.version}" for e in plans if e.mode != "without" and not facts[e.name].build]
    return Recipe(
        row=row,
        python=plan.python,
        overrides=row.overrides,
        steps=tuple(replace(s, sdists=(*sdists, *s.sdists)) for s in steps),
        extensions=tuple(plans),
        verify_pins=tuple(verify),
        warnings=tuple(warnings),
        sdists=sdists,
    )


@dataclass(frozen=True)
class _Measured:
    """What a build needs to know about the machine (nvcc, cores, memory)."""

    nvcc_version: str | None
    cores: int | None
    memory_gib: float | None


def _check_names(asked: Mapping[str, Choice], row: Row, facts: Mapping[str, ExtensionFacts]) -> None:
    for name in asked:
        if name not in facts:
            raise BadInputError(
                f"--build/--without {name!r}: not a package built against torch; the matrix knows "
                f"{', '.join(facts) or 'none'}{suggest(name, facts)}"
            )
        if name not in row.packages and asked[name] == "build":
            raise BadInputError(f"--build {name}: row {row.id} does not install {name}")


def _extension_steps(
    ext: ExtensionPlan, facts: ExtensionFacts, torch_reqs: tuple[str, ...], index: str | None
) -> tuple[list[Step], str | None]:
    """The steps that put one package built against torch in, and the warning it carries."""
    if ext.mode == "wheel":
        step = Step(
            name=ext.name,
            title=f"{ext.name} {ext.version} ({ext.reason})",
            requirements=(*torch_reqs, ext.requirement),
            index_url=index,
        )
        return [step], None
    if ext.mode == "without":
        return [], f"{ext.name} {ext.version} left out (--without {ext.name}): {ext.reason}"
    env = {"MAX_JOBS": str(ext.max_jobs), **facts.build_env}
    steps = [
        Step(
            name=f"{ext.name}-build-requires",
            title=f"what {ext.name}'s build needs, since it builds without isolation",
            requirements=(*torch_reqs, *facts.build_requires),
            index_url=index,
        ),
        Step(
            name=ext.name,
            title=f"{ext.name} {ext.version} (built against the installed torch)",
            requirements=(*torch_reqs, facts.build or ext.requirement),
            index_url=index,
            no_build_isolation=True,
            config_settings=facts.config_settings,
            env=tuple(sorted(env.items())),
            sdists=(ext.name,),  # the one package this step builds on purpose
        ),
    ]
    return steps, f"{ext.name} {ext.version}: {ext.reason}"


def _name(requirement: str) -> str:
    """The distribution a requirement line names (`verl[vllm]==0.9.1`, `flash-attn @ URL`)."""
    return re.split(r"[\[=@ ;]", requirement, maxsplit=1)[0]


def _extension_plan(
    plan: Plan, name: str, facts: ExtensionFacts, request: Choice, measured: _Measured
) -> ExtensionPlan:
    row = plan.row
    version = row.packages[name]
    without = without_reason(facts, row.verl.version)
    if request == "without":
        return ExtensionPlan(name=name, version=version, mode="without", reason=without)
    wheel, why_not = wheel_for(facts, row, version, plan.python, plan.target.glibc.value, name=name)
    if wheel is not None and request == "auto":
        url, sha256, abi, reason = wheel
        return ExtensionPlan(
            name=name, version=version, mode="wheel", reason=reason, url=url, sha256=sha256, cxx11abi=abi
        )
    if request == "build":
        return _build_plan(row, name, version, measured)
    flag = "--build-flash-attn" if name == "flash-attn" else f"--build {name}"
    raise InstallError(
        f"{name} {version} cannot be installed as it stands ({why_not}): pass {flag} to "
        f"compile it against torch {row.torch.version} after torch is installed (needs nvcc "
        f"{row.torch.cuda}, an hour or more), or --without {name} ({without}); nothing was changed"
    )


def _build_plan(row: Row, name: str, version: str, measured: _Measured) -> ExtensionPlan:
    cuda, nvcc = row.torch.cuda, measured.nvcc_version
    flag = "--build-flash-attn" if name == "flash-attn" else f"--build {name}"
    if cuda is None:
        raise InstallError(f"{name} {version} cannot be built for row {row.id}: its torch has no CUDA")
    if nvcc is None:
        raise InstallError(
            f"{flag} needs nvcc of CUDA {cuda} (CUDA_HOME/bin/nvcc or on PATH) and none was "
            f"found: install the CUDA toolkit, or use --without {name}; nothing was changed"
        )
    if nvcc.split(".")[0] != cuda.split(".")[0]:
        raise InstallError(
            f"{flag}: nvcc is CUDA {nvcc}, torch {row.torch.version} is built with "
            f"CUDA {cuda}; torch refuses to build extensions across CUDA majors. Put a CUDA "
            f"{cuda.split('.')[0]}.x toolkit first on PATH (or CUDA_HOME); nothing was changed"
        )
    memory = measured.memory_gib or GIB_PER_BUILD_JOB
    jobs = max(1, min(measured.cores or os.cpu_count() or 1, int(memory // GIB_PER_BUILD_JOB)))
    reason = (
        f"built from source with nvcc {nvcc} and MAX_JOBS={jobs} (from the cores and "
        f"{GIB_PER_BUILD_JOB} GiB of memory per job); this takes an hour or more"
    )
    return ExtensionPlan(name=name, version=version, mode="build", reason=reason, max_jobs=jobs)


def without_reason(facts: ExtensionFacts | None, verl_version: str) -> str:
    """What a run of this verl line can do without the package (read from its code; matrix data)."""
    if facts is not None:
        release = Version(verl_version).release
        for size in (2, 1):
            key = ".".join(str(p) for p in release[:size])
            if key in facts.without:
                return facts.without[key]
    return "the matrix does not say what this verl line does without it"


def without_flash_attn(facts: ExtensionFacts | None, verl_version: str) -> str:
    """What a run of this verl line can do without flash-attn."""
    if facts is None or not facts.without:
        return "check the verl version's FSDP settings: attn_implementation and use_remove_padding"
    return without_reason(facts, verl_version)


def wheel_for(  # noqa: PLR0911  # one return per reason a wheel does not fit
    facts: ExtensionFacts | None,
    row: Row,
    version: str,
    python: str,
    glibc: str | None,
    *,
    name: str = "flash-attn",
) -> tuple[tuple[str, str | None, bool, str] | None, str]:
    """((url, sha256, cxx11abi, reason), "") for a matching prebuilt wheel, else (None, why not)."""
    if facts is None or facts.url is None:
        return None, f"the matrix lists no prebuilt {name} wheels"
    release = facts.releases.get(version)
    torch_minor = ".".join(row.torch.version.split("+")[0].split(".")[:2])
    cuda_major = row.torch.cuda.split(".")[0] if row.torch.cuda else None
    arch = row.requires.arch[0]
    if release is None:
        return None, f"{name} {version} published no prebuilt wheels known to the matrix"
    if torch_minor not in release.torch:
        return None, f"{name} {version} published no wheel for torch {torch_minor}"
    if cuda_major is None or cuda_major not in release.cuda_majors:
        return None, f"{name} {version} published no wheel for CUDA {cuda_major}"
    if arch not in release.arch:
        return None, f"{name} {version} published no {arch} wheel"
    minor = ".".join(python.split(".")[:2])
    if minor not in release.python:
        return None, f"{name} {version} published no wheel for Python {minor}"
    if glibc is not None and parse_minor(glibc, "glibc") < parse_minor(release.glibc, "glibc"):
        return None, f"its prebuilt wheels need glibc >= {release.glibc} and the target has {glibc}"
    abi = Version(torch_minor) >= Version(facts.cxx11abi_from_torch)
    py = "cp" + "".join(python.split(".")[:2])
    url = facts.url.format(
        version=version,
        cuda_major=cuda_major,
        torch_minor=torch_minor,
        torch_version=row.torch.version,
        abi=str(abi).upper(),
        py=py,
        arch=arch,
    )
    sha256 = facts.sha256.get(url.rsplit("/", 1)[-1])
    reason = f"prebuilt for torch {torch_minor}, CUDA {cuda_major}, {py}, C++11 ABI {str(abi).upper()}"
    return (url, sha256, abi, reason), ""


def recipe_for(plan: Plan, requests: ExtensionRequests, env: Mapping[str, str]) -> Recipe:
    """The plan's recipe; a build request measures nvcc, cores and memory first."""
    if "build" not in requests.values():
        return build_recipe(plan, extensions=requests)
    return build_recipe(
        plan,
        extensions=requests,
        nvcc_version=nvcc_version(env),
        cores=os.cpu_count(),
        memory_gib=memory_gib(),
    )

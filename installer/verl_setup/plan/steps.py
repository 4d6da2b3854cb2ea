"""The recipe's types: one install of a row as typed steps (Step), how each package built against
torch gets in (ExtensionPlan), and the whole ordered procedure (Recipe). plan/recipe.py makes a
Recipe from a Plan; plan/whole_wheel.py and plan/user_recipe.py rewrite one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from verl_setup.matrix.closure import Closure
from verl_setup.matrix.schema import Row
from verl_setup.plan.user_packages import UserPackages
from verl_setup.plan.wheel_sources import Candidate
from verl_setup.util.binary import binary_only

# "torch", "engine", "verl", and per package built against torch "<name>" and "<name>-build-requires".
StepName = str
Choice = Literal["auto", "build", "without"]
# What the user asked per package built against torch (--build NAME, --without NAME); absent: auto.
ExtensionRequests = Mapping[str, Choice]
TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
# With no wheel in any source: install refuses (before anything changes); an image builds it.
Missing = Literal["refuse", "build"]


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
    source: str | None = None  # the wheel source it comes from (mode wheel)
    distribution: str | None = None  # a whole-project wheel in its place (ExtensionFacts.whole)
    # Every source that says it has the wheel, in order; install takes the first that does.
    candidates: tuple[Candidate, ...] = ()

    @property
    def requirement(self) -> str:
        """What the step installs."""
        name = self.distribution or self.name
        return f"{name} @ {self.url}" if self.mode == "wheel" and self.url else f"{name}=={self.version}"

    @property
    def index_url(self) -> str | None:
        """The index a wheel not yet looked up comes from (rendered scripts ask it at build time)."""
        if self.mode != "wheel" or self.url or not self.candidates:
            return None
        return self.candidates[0].index_url


@dataclass(frozen=True, kw_only=True)
class Step:
    """One `uv pip install` of a recipe: what, from where, and with which resolver options."""

    name: StepName
    title: str
    requirements: tuple[str, ...]
    index_url: str | None = None
    overrides: bool = False
    no_build_isolation: bool = False
    no_deps: bool = False
    extra_index_url: str | None = None  # a wheel source's index, beside the row's
    no_build: tuple[str, ...] = ()  # packages that must come as wheels (never their sdist)
    config_settings: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    constraints: bool = False  # the recipe's closure file (--constraint)
    exclude_newer: str | None = None  # a target without a recorded closure: the index as it stood
    # Wheels only, except these sdists (the row's `sdists`, and the package a build step builds).
    sdists: tuple[str, ...] = ()
    binary_only: bool = True  # False: the user's own (plan/user_recipe.py), wheel or sdist as uv does
    # Only an image layer (torch alone, reused while other pins move): a later step installs the
    # same again, so a venv (install, setup-venv.sh, Apptainer's one-piece image) skips it.
    layer_only: bool = False

    def pip_args(self, overrides_file: str, constraints_file: str) -> list[str]:
        """Everything after `uv pip install --python PY`: the same in all three renderings."""
        args = list(self.requirements)
        if self.constraints:
            args += ["--constraint", constraints_file]
        if self.exclude_newer is not None:
            args += ["--exclude-newer", self.exclude_newer]
        if self.index_url is not None:
            args += ["--extra-index-url", self.index_url]
        if self.extra_index_url is not None:
            args += ["--extra-index-url", self.extra_index_url]
        if self.index_url is not None or self.extra_index_url is not None:
            args += ["--index-strategy", "unsafe-best-match"]
        for name in self.no_build:
            args += ["--no-build-package", name]
        if self.overrides:
            args += ["--override", overrides_file]
        args += binary_only(self.sdists) if self.binary_only else []
        if self.no_build_isolation:
            args.append("--no-build-isolation")
        if self.no_deps:
            args.append("--no-deps")
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
    left_out_sources: tuple[str, ...] = ()  # direct-reference packages left out (--without NAME)
    verify_pins: tuple[str, ...] = field(default=())
    warnings: tuple[str, ...] = ()
    sdists: tuple[str, ...] = ()  # built from their sdist on purpose; everything else is a wheel
    constraints: tuple[str, ...] = ()  # the closure as `name==version`, every step's --constraint
    closure: Closure | None = None
    user: UserPackages = field(default_factory=UserPackages)  # plan/user_recipe.py adds them

    @property
    def venv_steps(self) -> tuple[Step, ...]:
        """The steps a venv runs: all but the image-layer ones (one resolve installs the row)."""
        return tuple(s for s in self.steps if not s.layer_only)

    def step(self, name: StepName) -> Step | None:
        """The step of that name, if the recipe has one."""
        return next((s for s in self.steps if s.name == name), None)

    def left_out_sources_modules(self) -> dict[str, str]:
        """module -> why, for the direct-reference packages left out (the probe's `absent`)."""
        return {n.replace("-", "_"): f"{n} left out (--without {n})" for n in self.left_out_sources}

    def extension(self, name: str) -> ExtensionPlan | None:
        """The plan of one package built against torch, if the row has it."""
        return next((e for e in self.extensions if e.name == name), None)

    @property
    def flash_attn(self) -> ExtensionPlan | None:
        """flash-attn's plan, if the row has flash-attn."""
        return self.extension("flash-attn")

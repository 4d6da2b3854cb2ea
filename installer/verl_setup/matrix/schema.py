"""Matrix row and CUDA-fact dataclasses (util/databuild.py builds them from YAML, reporting by key)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from verl_setup.util.tokens import ENV_NAME, IMAGE, NAME, OPTION, PATTERN, REQUIREMENT, URL, VALUE, VERSION
from verl_setup.util.vocab import BackendName, EngineName

# The words a rows file names reach shell scripts and Dockerfiles: each has its shape (util/tokens).
Name = Annotated[str, NAME]
Ver = Annotated[str, VERSION]
EnvName = Annotated[str, ENV_NAME]
Requirement = Annotated[str, REQUIREMENT]


@dataclass(frozen=True, kw_only=True)
class VerlPin:
    """verl itself: exact version and the extras to install it with (none = no engine extra)."""

    version: Ver
    extras: tuple[Name, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Engine:
    """The rollout engine; name "none" only for rows without a GPU."""

    name: EngineName
    version: Ver | None


@dataclass(frozen=True, kw_only=True)
class PythonSpec:
    """Supported Python minors and the exact version to install."""

    supported: tuple[Ver, ...]
    recommended: Ver


@dataclass(frozen=True, kw_only=True)
class TorchPin:
    """torch: exact version, the CUDA its wheel was built with, and the index that serves it."""

    version: Ver
    cuda: Ver | None
    index: Name


@dataclass(frozen=True, kw_only=True)
class DriverRequirement:
    """Minimum driver under each policy."""

    compat: Ver
    strict: Ver


@dataclass(frozen=True, kw_only=True)
class CcRange:
    """Inclusive compute-capability range every GPU must fall in."""

    min: Ver
    max: Ver


@dataclass(frozen=True, kw_only=True)
class Requires:
    """What the host must offer for a row to fit."""

    arch: tuple[Name, ...]
    glibc: Ver
    cuda: Ver | None
    driver: DriverRequirement | None
    compute_capability: CcRange | None
    gpu: bool = True
    # Ascend/AMD rows (plan/accelerator.py): family, chip families or gfx targets, CANN/ROCm tested.
    accelerator: Literal["ascend", "rocm"] | None = None
    chips: tuple[Name, ...] = ()
    toolkit: Ver | None = None


@dataclass(frozen=True, kw_only=True)
class KnownIssue:
    """A reported problem shown as a warning (optionally only for some Python minors)."""

    summary: str
    source: str
    python: tuple[Ver, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Docker:
    """Container facts for rendering."""

    base_image: Annotated[str, IMAGE]


@dataclass(frozen=True, kw_only=True)
class Row:
    """One tested verl stack: exact pins, requirements, and the evidence for each."""

    id: Name
    deprecated: bool = False
    verl: VerlPin
    engine: Engine
    python: PythonSpec
    torch: TorchPin
    packages: dict[Name, Ver]
    overrides: tuple[Requirement, ...] = ()
    requires: Requires
    docker: Docker | None = None
    evidence: dict[Name, str]
    known_issues: tuple[KnownIssue, ...] = ()
    # Modules whose import needs an NVIDIA driver although it fails otherwise on a machine
    # without one (module -> why, with its source): the probe counts them as `gpu` there.
    gpu_only_imports: dict[Name, str] = field(default_factory=dict)
    # Imports that fail on this row because of one of its known issues (the probe's name for the
    # import -> the issue): the probe reports them as `known`, not as failures.
    known_broken_imports: dict[str, str] = field(default_factory=dict)
    # The training backend the row carries (verl's [fsdp] / [megatron] extras): a second axis.
    backend: BackendName = "fsdp"
    # Packages installed last without their dependencies, as verl's uv flow declares them
    # (`[[tool.uv.dependency-metadata]] requires-dist = []`): their own pins would move the stack.
    no_deps: tuple[Name, ...] = ()
    # Packages that come from a direct reference instead of the index (name -> `git+https://...@rev`).
    sources: dict[Name, Requirement] = field(default_factory=dict)
    notes: str | None = None
    line: int = field(default=0, compare=False)

    def requirements(self) -> list[str]:
        """Every exact pin as a requirement line, verl first, in a stable order."""
        extras = f"[{','.join(self.verl.extras)}]" if self.verl.extras else ""
        lines = [f"verl{extras}=={self.verl.version}"]
        if self.engine.name != "none":
            lines.append(f"{self.engine.name}=={self.engine.version}")
        lines.append(f"torch=={self.torch.version}")
        lines.extend(f"{name}=={version}" for name, version in self.packages.items())
        return lines

    def to_dict(self) -> dict[str, Any]:
        """The row as plain data (what `plan --json` prints under "row")."""
        data = dataclasses.asdict(self)
        data.pop("line")
        data["hash"] = self.content_hash()
        return data

    @functools.cached_property
    def _hash(self) -> str:
        return self._content_hash()

    def content_hash(self) -> str:
        """sha256 of the row's canonical JSON (computed once: rows are frozen)."""
        return self._hash

    def _content_hash(self) -> str:
        """sha256 of the row's canonical JSON: changes whenever any pin or requirement does.

        Fields left at their default are left out, so a new optional field does not unprove
        every row (matrices/proof.yaml records proofs by this hash)."""
        data = _plain(self)
        data.pop("line")
        for f in dataclasses.fields(self):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if f.name in data and default is not dataclasses.MISSING and getattr(self, f.name) == default:
                data.pop(f.name)
        for key in [k for k in ("accelerator", "chips", "toolkit") if not data["requires"].get(k)]:
            data["requires"].pop(key)
        blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()


@dataclass(frozen=True, kw_only=True)
class IndexSpec:
    """An extra package index a row may name."""

    url: Annotated[str, URL]
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class WheelRelease:
    """What one flash-attn release published prebuilt: torch minors, CUDA majors, platform floor."""

    torch: tuple[Ver, ...]
    cuda_majors: tuple[Ver, ...]
    python: tuple[Ver, ...]
    glibc: Ver
    arch: tuple[Name, ...] = ("x86_64",)
    source: str


@dataclass(frozen=True, kw_only=True)
class ExtensionFacts:
    """A package built against the installed torch (flash-attn, TransformerEngine's torch module,
    apex): prebuilt wheels where a project publishes them, else a build on request, else left out."""

    source: str
    url: Annotated[str, URL] | None = None  # prebuilt-wheel URL pattern; None: the project publishes none
    build: Requirement | None = None  # what a build installs, when not `name==version` (a git URL)
    cxx11abi_from_torch: Ver = "2.7"
    build_requires: tuple[Requirement, ...] = ()
    build_env: dict[EnvName, Annotated[str, VALUE]] = field(default_factory=dict)
    config_settings: tuple[Annotated[str, OPTION], ...] = ()
    releases: dict[Ver, WheelRelease] = field(default_factory=dict)
    sha256: dict[str, str] = field(default_factory=dict)
    without: dict[Ver, str] = field(default_factory=dict)
    # The modules it provides: left out, their imports are reported as such, not as failures.
    modules: tuple[Name, ...] = ()
    # Row packages that go with it and are left out with it.
    companions: tuple[Name, ...] = ()
    # A distribution that carries the whole project in one wheel built against torch (verl's
    # wheelhouse serves TransformerEngine so): a source's wheel of it replaces this package and
    # its companions.
    whole: Name | None = None
    # CPU-core minutes one build takes (the refusal's time estimate divides it by the build jobs).
    build_core_minutes: int | None = None


@dataclass(frozen=True, kw_only=True)
class ServedWheels:
    """One set of builds a wheel source serves: which packages at which versions, for which torch
    minors, CUDA releases, Pythons, CPU architectures and C++ ABI, and the glibc its wheels need."""

    packages: dict[Name, tuple[Ver, ...]]
    torch: tuple[Ver, ...]
    cuda: tuple[Ver, ...]
    python: tuple[Ver, ...]
    arch: tuple[Name, ...] = ("x86_64",)
    glibc: Ver
    cxx11abi: bool = True


# How a source says which torch a wheel was built for: the wheel's file name (a local version
# label), the index's own path (one index per torch), a manifest beside the wheel, or nothing
# (only the ABI check after the wheel lands can tell).
TorchFrom = Literal["file-name", "index-path", "manifest", "abi-check"]
Trust = Literal["upstream", "community", "user"]


@dataclass(frozen=True, kw_only=True)
class WheelSource:
    """A place prebuilt torch-extension wheels come from, tried in order before install refuses.

    `release-assets`: a project's own release assets, named by the url pattern and build table of
    each package under torch_extensions. `index`: a PEP 503 simple index (a folder or a URL) whose
    page for the package lists the wheels; `serves` says what it holds, as read from its sources."""

    id: Name
    kind: Literal["release-assets", "index"]
    url: Annotated[str, URL] | None = (
        None  # index: the simple index URL ({cuda_tag} cu130, {torch_minor} 2.11)
    )
    packages: tuple[Name, ...] = ()  # release-assets: the torch_extensions entries it serves
    serves: tuple[ServedWheels, ...] = ()
    torch_from: TorchFrom
    trust: Trust
    enabled: bool = True
    evidence: str
    notes: str | None = None
    line: int = field(default=0, compare=False)


# The older name of the same facts (flash-attn was the first such package).
FlashAttnFacts = ExtensionFacts


@dataclass(frozen=True, kw_only=True)
class Unfit:
    """Engine releases a verl line excludes, said once with the reason, so plan can explain them."""

    verl: Ver
    engine: EngineName
    versions: tuple[Ver, ...]
    reason: str
    source: str


@dataclass(frozen=True, kw_only=True)
class SdistAllowance:
    """A package the recipe builds from its sdist on purpose (installs are binary-only otherwise)."""

    versions: tuple[str, ...]
    reason: str
    pinned_only: bool = False  # only for rows that pin it, not as every row's transitive dependency


@dataclass(frozen=True, kw_only=True)
class RowsFile:
    """matrices/verl.yaml."""

    schema: int
    indexes: dict[Name, IndexSpec] = field(default_factory=dict)
    # Installs and locks take wheels only; these few are built from their sdist on purpose.
    sdists: dict[Name, SdistAllowance] = field(default_factory=dict)
    torch_extensions: dict[Name, ExtensionFacts] = field(default_factory=dict)
    wheel_sources: tuple[WheelSource, ...] = ()
    unfit: tuple[Unfit, ...] = ()
    rows: tuple[Row, ...]

    @property
    def flash_attn(self) -> ExtensionFacts | None:
        """flash-attn's facts, if the matrix has them."""
        return self.torch_extensions.get("flash-attn")

    def built_from_sdist(self, row: Row) -> tuple[str, ...]:
        """The packages a row's install builds from their sdist: those listed in `sdists` that the
        row pins at a listed version, or does not pin at all (a transitive dependency)."""
        return tuple(
            name
            for name, allowed in self.sdists.items()
            if (name not in row.packages and not allowed.pinned_only)
            or row.packages.get(name) in allowed.versions
        )

    def from_index(self, row: Row) -> list[str]:
        """The row's requirement lines a package index serves (not those built from a source URL)."""
        from_source = {n for n, e in self.torch_extensions.items() if e.build}
        return [r for r in row.requirements() if r.split("==")[0] not in from_source]

    def without_extensions(self, row: Row) -> list[str]:
        """The row's requirement lines with every package built against torch left out, and the
        companions they take with them (what `matrix prove` locks)."""
        present = [n for n in self.torch_extensions if n in row.packages]
        out = set(present) | {c for n in present for c in self.torch_extensions[n].companions}
        return [r for r in row.requirements() if r.split("==")[0].split("[")[0] not in out]

    def left_out_modules(self, names: Iterable[str]) -> dict[str, str]:
        """module -> "NAME left out (--without NAME)" for the packages built against torch named."""
        return {
            module: f"{name} left out (--without {name})"
            for name in names
            for module in self.torch_extensions[name].modules
            if name in self.torch_extensions
        }


@dataclass(frozen=True, kw_only=True)
class DriverFloor:
    """A driver minimum and which table it came from."""

    min_driver: Ver
    source: str


@dataclass(frozen=True, kw_only=True)
class Architecture:
    """A compute capability's architecture and the first CUDA that targets it."""

    name: str
    first_cuda: Ver
    # The oldest driver branch that runs this architecture at all (no row can go below it).
    min_driver: Ver | None = None


@dataclass(frozen=True, kw_only=True)
class ForwardCompat:
    """NVIDIA's CUDA forward compatibility: a newer CUDA user-mode driver (the cuda-compat package)
    over an older kernel driver, on data-center GPUs and the listed driver branches only."""

    source: str
    # CUDA major.minor -> the kernel-driver branches its cuda-compat package supports.
    branches: dict[Ver, tuple[Ver, ...]]
    end_of_life: dict[Ver, Ver] = field(default_factory=dict)  # branch -> "YYYY-MM"
    # GPU name patterns of the products forward compatibility is supported on.
    gpus: tuple[str, ...]
    package: Annotated[str, PATTERN]  # the apt package name pattern, {major} and {minor} filled in
    library_dir: Annotated[str, PATTERN]  # where that package puts libcuda.so (prepended to LD_LIBRARY_PATH)
    env: dict[EnvName, Annotated[str, VALUE]] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class CudaFile:
    """matrices/cuda.yaml."""

    schema: int
    sources: dict[str, str]
    families: dict[Ver, DriverFloor]
    toolkits: dict[Ver, DriverFloor]
    architectures: dict[Ver, Architecture]
    windows_families: dict[Ver, DriverFloor] = field(default_factory=dict)  # WSL: the Windows driver
    forward_compat: ForwardCompat | None = None


def _plain(value: Any) -> Any:
    """dataclasses.asdict without its deep copies (the hash of every row is read on each plan)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value

"""`verl-setup matrix propose`: candidate rows for releases newer than the matrix, from their metadata.

New verl releases bring their engine through their extras (verl[vllm] pins vllm==X); new engine
releases that no verl extra pins yet are paired with the newest verl, installed without the
extra. The engine pins torch; torch's Requires-Dist names its CUDA runtime; the engine pins
flashinfer; cuda.yaml gives the driver floors. A pairing whose requirements cannot meet on the
index is refused with the two sides that do not meet, and every candidate is resolved with uv
for each Python minor and platform it claims. Nothing is written into matrices/: the result is
a file for a person to review, then `make prove`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl_setup.environment.uv import explain_failure, python_platform
from verl_setup.maintenance.check import resolution_of, resolve
from verl_setup.maintenance.index import Index
from verl_setup.maintenance.metadata import (
    ReleaseMeta,
    UvConfig,
    cuda_of,
    exact_pin,
    glibc_floor,
    linux_wheels,
    python_minors,
    read_release,
    requirements_of,
    serves_python,
    uv_config,
)
from verl_setup.matrix.load import Matrix
from verl_setup.matrix.schema import (
    CcRange,
    DriverRequirement,
    Engine,
    PythonSpec,
    Requires,
    Row,
    TorchPin,
    VerlPin,
)
from verl_setup.util.vocab import ROLLOUT_ENGINES, EngineName

# Pins taken from the resolution when no package pins them exactly, as today's rows carry them.
RESOLVED_PINS = ("torchvision", "torchaudio", "transformers", "ray", "tensordict", "numpy")
FLASH_ATTN_MIN_CC = "8.0"


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """A release that cannot become a row, and why."""

    release: str
    reason: str


@dataclass(kw_only=True)
class Candidate:
    """A proposed row and where it was resolved."""

    row: Row
    resolved: dict[str, str] = field(default_factory=dict)  # "3.12 x86_64-manylinux_2_28" -> "ok" or why not


def _stable(version: str) -> Version | None:
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    return None if v.is_prerelease or v.is_devrelease else v


def new_releases(index: Index, name: str, since: str, newer_than: Version | None) -> list[str]:
    """Stable, unyanked releases first uploaded after `since` and newer than `newer_than`, oldest first."""
    out = []
    for version, release in index.releases(name).items():
        v = _stable(version)
        if v is None or release.yanked is not None or (release.uploaded or "") <= since:
            continue
        if newer_than is None or v > newer_than:
            out.append(v)
    return [str(v) for v in sorted(out)]


def default_since(matrix: Matrix, index: Index) -> str:
    """The newest upload date among the verl, engine and torch releases the matrix pins."""
    dates = []
    for row in matrix.rows:
        pins = [("verl", row.verl.version), ("torch", row.torch.version)]
        if row.engine.version:
            pins.append((row.engine.name, row.engine.version))
        for name, version in pins:
            release = index.releases(name).get(version)
            if release is not None and release.uploaded:
                dates.append(release.uploaded)
    return max(dates) if dates else "1970-01-01"


class Proposer:
    """Builds and resolves candidates for one matrix against one index."""

    def __init__(
        self,
        matrix: Matrix,
        index: Index,
        *,
        uv: str,
        env: Mapping[str, str],
        today: str,
        say: Callable[[str], None],
    ) -> None:
        self.matrix, self.index, self.uv, self.env, self.today, self.say = matrix, index, uv, env, today, say
        self._configs: dict[str, UvConfig | None] = {}

    def _covered(self, name: str) -> Version | None:
        if name == "verl":
            versions = [r.verl.version for r in self.matrix.rows]
        elif name == "torch":
            versions = [r.torch.version for r in self.matrix.rows]
        else:
            versions = [
                r.engine.version for r in self.matrix.rows if r.engine.name == name and r.engine.version
            ]
        parsed = [Version(v) for v in versions]
        return max(parsed) if parsed else None

    def propose(self, since: str) -> tuple[list[Candidate], list[Refusal]]:
        """Every candidate row and every refusal for releases after `since`."""
        pairs: list[tuple[ReleaseMeta, str | None, EngineName, str]] = []
        for version in new_releases(self.index, "verl", since, self._covered("verl")):
            meta = read_release(self.index, "verl", version)
            for engine in ROLLOUT_ENGINES:
                pinned = (
                    exact_pin(requirements_of(meta, engine), engine)
                    if meta and engine in meta.extras
                    else None
                )
                if meta is not None and pinned:
                    pairs.append((meta, engine, engine, pinned))
        newest = self._newest_verl()
        for engine in ROLLOUT_ENGINES:
            for version in new_releases(self.index, engine, since, self._covered(engine)):
                if newest is not None and not any(p[2] == engine and p[3] == version for p in pairs):
                    pairs.append((newest, None, engine, version))
        candidates: list[Candidate] = []
        refused: list[Refusal] = []
        for verl, extra, engine, version in pairs:
            self.say(f"{engine} {version} with verl {verl.version}: reading metadata")
            outcome = self._candidate(verl, extra, engine, version)
            if isinstance(outcome, Candidate):
                candidates.append(outcome)
            else:
                refused.append(outcome)
        pinned_torch = {c.row.torch.version for c in candidates}
        for version in new_releases(self.index, "torch", since, self._covered("torch")):
            if version not in pinned_torch:
                reason = "no vllm or sglang release proposed here pins it (a row's torch is its engine's pin)"
                refused.append(Refusal(release=f"torch {version}", reason=reason))
        return candidates, refused

    def _uv_config(self, version: str) -> UvConfig | None:
        if version not in self._configs:
            self._configs[version] = uv_config(self.index, "verl", version)
        return self._configs[version]

    def _newest_verl(self) -> ReleaseMeta | None:
        stable = [
            v for v, r in self.index.releases("verl").items() if _stable(v) is not None and r.yanked is None
        ]
        return read_release(self.index, "verl", str(max(Version(v) for v in stable))) if stable else None

    def _candidate(  # noqa: PLR0911  # one return per reason a pairing cannot be a row
        self, verl: ReleaseMeta, extra: str | None, engine: EngineName, version: str
    ) -> Candidate | Refusal:
        name = f"{engine} {version}"
        meta = read_release(self.index, engine, version)
        if meta is None:
            return Refusal(release=name, reason=f"the index has no Linux x86_64 wheel of {name}")
        verl_reqs, engine_reqs = requirements_of(verl, extra), requirements_of(meta)
        torch = exact_pin(engine_reqs, "torch")
        if torch is None:
            return Refusal(
                release=name, reason=f"{name} does not pin torch exactly, so it names no one torch"
            )
        verl_torch = exact_pin(verl_reqs, "torch")
        if verl_torch is not None and verl_torch != torch:
            return Refusal(
                release=name,
                reason=f"{name} pins torch=={torch}, verl {verl.version}[{extra}] pins torch=={verl_torch}",
            )
        config = self._uv_config(verl.version)
        overrides = config.overrides if config is not None and extra else ()
        conflict = self._conflict(verl, extra, verl_reqs, name, engine_reqs, overridden=_names(overrides))
        if conflict:
            forced = [o for o in (config.overrides if config else ()) if _names([o]) == {conflict[0]}]
            note = ""
            if forced and not extra:
                pin = forced[0].split(";")[0].strip()
                note = (
                    f" (verl {verl.version}'s [tool.uv] override-dependencies force {pin} for its own "
                    "extras; not carried to an engine release verl does not pin)"
                )
            return Refusal(release=name, reason=conflict[1] + note)
        torch_meta = read_release(self.index, "torch", torch)
        if torch_meta is None:
            return Refusal(
                release=name,
                reason=f"torch {torch}, which {name} pins, has no Linux x86_64 wheel on the index",
            )
        cuda = cuda_of(requirements_of(torch_meta))
        if cuda is None:
            return Refusal(
                release=name,
                reason=f"torch {torch}'s wheel names no CUDA runtime in Requires-Dist (a CPU build?)",
            )
        floor, full = self.matrix.cuda.family_floor(cuda[0]), self.matrix.cuda.full_support(cuda[0])
        if floor is None or full is None:
            return Refusal(
                release=name,
                reason=f"CUDA {cuda[0]} (torch {torch}) is not in cuda.yaml: add NVIDIA's driver rows first",
            )
        torch_files = self.index.releases("torch")[torch]
        engine_files = self.index.releases(engine)[version]
        minors = [
            m
            for m in python_minors(verl.requires_python, meta.requires_python, torch_meta.requires_python)
            if serves_python(linux_wheels(torch_files, "x86_64"), m)
            and serves_python(linux_wheels(engine_files, "x86_64"), m)
        ]
        if not minors:
            why = f"verl {verl.version} {verl.requires_python}, {name} {meta.requires_python}, torch {torch}"
            return Refusal(release=name, reason=f"no Python minor is admitted by all of: {why}")
        row = self._row(
            verl=verl,
            extra=extra,
            meta=meta,
            engine_reqs=engine_reqs,
            verl_reqs=verl_reqs,
            torch_meta=torch_meta,
            cuda=cuda,
            minors=minors,
        )
        if overrides and config is not None:
            together = [g for g in config.conflicts if extra in g]
            evidence = dict(row.evidence)
            evidence["overrides"] = (
                f"verl {verl.version} pyproject.toml [tool.uv] override-dependencies ({config.source})"
            )
            if together:
                evidence["overrides"] += (
                    f"; its [tool.uv] conflicts keep {', '.join(together[0])} apart: the row takes [{extra}]"
                )
            row = dataclasses.replace(row, overrides=tuple(overrides), evidence=evidence)
        return self._resolve(row, minors, name)

    def _conflict(
        self,
        verl: ReleaseMeta,
        extra: str | None,
        verl_reqs: list[Requirement],
        name: str,
        engine_reqs: list[Requirement],
        *,
        overridden: set[str],
    ) -> tuple[str, str] | None:
        """(name, why) of the first requirement both sides cannot meet with any release on the index.

        A name verl overrides (its [tool.uv] override-dependencies) is decided by the override."""
        allowed: dict[str, SpecifierSet] = {}
        for req in verl_reqs:
            key = canonicalize_name(req.name)
            allowed[key] = allowed.get(key, SpecifierSet()) & req.specifier
        for req in engine_reqs:
            key = canonicalize_name(req.name)
            if key in overridden or key not in allowed or not str(req.specifier) or not str(allowed[key]):
                continue
            both = allowed[key] & req.specifier
            versions = [
                v for v, r in self.index.releases(key).items() if r.yanked is None and _stable(v) is not None
            ]
            if not any(both.contains(v) for v in versions):
                side = f"verl {verl.version}" + (f"[{extra}]" if extra else "")
                return key, f"{name} needs {req.name}{req.specifier}, {side} allows {req.name}{allowed[key]}"
        return None

    def _row(
        self,
        *,
        verl: ReleaseMeta,
        extra: str | None,
        meta: ReleaseMeta,
        engine_reqs: list[Requirement],
        verl_reqs: list[Requirement],
        torch_meta: ReleaseMeta,
        cuda: tuple[str, str],
        minors: list[str],
    ) -> Row:
        engine, version, torch = meta.name, meta.version, torch_meta.version
        verl_side = f"verl {verl.version}" + (f" [{extra}]" if extra else "")
        packages: dict[str, str] = {}
        evidence: dict[str, str] = {}
        for pkg in ("torchvision", "torchaudio", "flashinfer-python", "sglang-kernel", "transformers"):
            for who, reqs in ((verl_side, verl_reqs if extra else []), (f"{engine} {version}", engine_reqs)):
                pinned = exact_pin(reqs, pkg)
                if pinned:
                    packages[pkg] = pinned
                    evidence[pkg] = f"meta: {who} pins {pkg}=={pinned}"
                    break
        recommended = self._recommended(minors)
        minor = ".".join(recommended.split(".")[:2])
        torch_wheels = linux_wheels(self.index.releases("torch")[torch], "x86_64")
        engine_wheels = linux_wheels(self.index.releases(engine)[version], "x86_64")
        floors = [f for f in (glibc_floor(torch_wheels, minor), glibc_floor(engine_wheels, minor)) if f]
        glibc = max(floors, key=lambda f: tuple(int(p) for p in f.split("."))) if floors else "2.17"
        arch = ["x86_64"]
        if all(
            serves_python(
                linux_wheels(self.index.releases(n)[v], "aarch64"), ".".join(recommended.split(".")[:2])
            )
            for n, v in (("torch", torch), (engine, version))
        ):
            arch.append("aarch64")
        rules, major = self.matrix.cuda, cuda[0].split(".")[0]
        compat, strict = rules.family_floor(cuda[0]), rules.full_support(cuda[0])
        newest_cc = max(
            (cc for cc, a in rules.facts.architectures.items() if Version(a.first_cuda) <= Version(cuda[0])),
            key=Version,
        )
        how = (
            f"[{extra}] pins {engine}=={version}"
            if extra
            else f"its [{engine}] extra pins an older {engine}, so the row installs verl without it "
            f"and pins {engine} {version}"
        )
        evidence.update(
            {
                "verl": f"meta: verl {verl.version} ({verl.wheel}, uploaded {verl.uploaded}): {how}; "
                f"Requires-Python {verl.requires_python}",
                "engine": f"meta: {engine} {version} ({meta.wheel}, uploaded {meta.uploaded})",
                "torch": f"meta: {engine} {version} pins torch=={torch}; torch {torch}'s wheel "
                f"({torch_meta.wheel}) requires {cuda[1]} (CUDA {cuda[0]})",
                "python": (
                    f"meta: Requires-Python of verl {verl.requires_python}, {engine} {meta.requires_python}, "
                    f"torch {torch_meta.requires_python or 'none'}, and torch's Linux wheels: "
                    f"{', '.join(minors)}"
                ),
                "requires.glibc": f"meta: manylinux_{glibc.replace('.', '_')} is the newest floor of the "
                f"torch {torch} and {engine} {version} wheels for Python {minor}",
                "requires.driver": f"cuda.yaml: CUDA {major}.x family floor {compat} (T2); "
                f"CUDA {cuda[0]} full support {strict} (T3)",
                "requires.compute_capability": "flash-attn 2 needs sm_80+ (as today's GPU rows); "
                f"cuda.yaml architectures: CUDA {cuda[0]} targets up to sm_{newest_cc}",
            }
        )
        return Row(
            id=self._id(verl.version, engine, version),
            verl=VerlPin(version=verl.version, extras=(extra,) if extra else ()),
            engine=Engine(name=engine, version=version),  # type: ignore[arg-type]  # engine comes from ROLLOUT_ENGINES
            python=PythonSpec(supported=tuple(minors), recommended=recommended),
            torch=TorchPin(version=torch, cuda=cuda[0], index="default"),
            packages=packages,
            requires=Requires(
                arch=tuple(arch),
                glibc=glibc,
                cuda=cuda[0],
                driver=DriverRequirement(compat=str(compat), strict=str(strict)),
                compute_capability=CcRange(min=FLASH_ATTN_MIN_CC, max=newest_cc),
            ),
            evidence=evidence,
            notes=(
                f"Proposed by `verl-setup matrix propose` on {self.today} from the packages' metadata; "
                "flash-attn is not pinned (install it in its own step, or --without flash-attn). "
                "Review, then `make prove`."
            ),
        )

    def _recommended(self, minors: list[str]) -> str:
        """The exact Python: what today's rows recommend for the newest minor they share with it."""
        for minor in reversed(minors):
            for row in self.matrix.rows:
                if row.python.recommended.startswith(minor + "."):
                    return row.python.recommended
        return f"{minors[-1]}.0"

    def _id(self, verl: str, engine: str, version: str) -> str:
        base = f"verl{'.'.join(verl.split('.')[:2])}-{engine}{version}"
        taken = {r.id for r in self.matrix.rows}
        return base if base not in taken else f"{base}-proposed"

    def _resolve(self, row: Row, minors: list[str], name: str) -> Candidate | Refusal:
        """Resolve the oldest Python first (its ray/tensordict/numpy then install on every minor, as
        today's rows pin numpy for 3.10), then every other minor and architecture with the same pins."""
        candidate, supported = Candidate(row=row), list(minors)
        while supported:
            first = supported[0]
            self.say(f"{row.id}: resolving for Python {first} on {python_platform(row)}")
            code, out, err = resolve(row, self.matrix, self.uv, self.env, python=first)
            candidate.resolved[f"{first} {python_platform(row)}"] = (
                "ok" if code == 0 else explain_failure(err)
            )
            if code == 0:
                break
            supported.pop(0)
        if not supported:
            reason = candidate.resolved[f"{minors[-1]} {python_platform(row)}"]
            return Refusal(
                release=name, reason=f"with verl {row.verl.version} it resolves for no Python minor: {reason}"
            )
        resolved = resolution_of(out)
        packages, evidence = dict(row.packages), dict(row.evidence)
        for pkg in RESOLVED_PINS:
            if pkg in resolved and pkg not in packages:
                packages[pkg] = resolved[pkg][0]
                evidence[pkg] = (
                    f"uv: resolved for Python {supported[0]} on {python_platform(row)} on {self.today}"
                )
        # An override replaces the row's own pin of that name too, so it is narrowed to the pin.
        overrides = tuple(_narrowed(o, packages) for o in row.overrides)
        row = dataclasses.replace(row, packages=packages, evidence=evidence, overrides=overrides)
        arches = list(row.requires.arch)
        for arch in row.requires.arch:
            variant = dataclasses.replace(row, requires=dataclasses.replace(row.requires, arch=(arch,)))
            for minor in list(supported):
                where = f"{minor} {python_platform(variant)}"
                if where in candidate.resolved or arch not in arches:
                    continue
                self.say(f"{row.id}: resolving for Python {minor} on {python_platform(variant)}")
                code, _, err = resolve(variant, self.matrix, self.uv, self.env, python=minor)
                candidate.resolved[where] = "ok" if code == 0 else explain_failure(err)
                if code != 0 and arch == row.requires.arch[0]:
                    supported.remove(minor)
                elif code != 0:
                    arches.remove(arch)  # one row has one arch list: a minor it fails on drops the arch
        if not supported:
            return Refusal(
                release=name, reason=f"with verl {row.verl.version} it resolves for no Python minor"
            )
        recommended = self._recommended(supported)
        known = any(r.python.recommended == recommended for r in self.matrix.rows)
        evidence["python"] += f"; uv resolves it for {', '.join(supported)}; {recommended}: " + (
            "the exact version today's rows recommend for that minor"
            if known
            else "no row names a patch yet (review)"
        )
        candidate.row = dataclasses.replace(
            row,
            evidence=evidence,
            python=PythonSpec(supported=tuple(supported), recommended=recommended),
            requires=dataclasses.replace(row.requires, arch=tuple(arches)),
        )
        return candidate


def _names(requirements: Sequence[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def _narrowed(override: str, packages: Mapping[str, str]) -> str:
    req = Requirement(override)
    name = canonicalize_name(req.name)
    pinned = next((v for k, v in packages.items() if canonicalize_name(k) == name), None)
    if pinned is None:
        return override
    return f"{req.name}=={pinned}" + (f" ; {req.marker}" if req.marker else "")


def row_data(row: Row) -> dict[str, Any]:
    """A row in matrices/verl.yaml's layout, as a person would write it."""
    req = row.requires
    assert req.driver is not None  # noqa: S101  # candidates are GPU rows
    assert req.compute_capability is not None  # noqa: S101
    return {
        "id": row.id,
        "verl": {"version": row.verl.version, "extras": list(row.verl.extras)},
        "engine": {"name": row.engine.name, "version": row.engine.version},
        "python": {"supported": list(row.python.supported), "recommended": row.python.recommended},
        "torch": {"version": row.torch.version, "cuda": row.torch.cuda, "index": row.torch.index},
        "packages": dict(row.packages),
        **({"overrides": list(row.overrides)} if row.overrides else {}),
        "requires": {
            "arch": list(req.arch),
            "glibc": req.glibc,
            "cuda": req.cuda,
            "driver": {"compat": req.driver.compat, "strict": req.driver.strict},
            "compute_capability": {"min": req.compute_capability.min, "max": req.compute_capability.max},
        },
        "evidence": dict(row.evidence),
        "notes": row.notes,
    }

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

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from verl_setup.environment.index import Index
from verl_setup.environment.uv import UV_MANYLINUX, explain_failure, python_platform
from verl_setup.maintenance.candidate_row import candidate_row, recommended_python
from verl_setup.maintenance.check import resolution_of, resolve, row_floor
from verl_setup.maintenance.metadata import (
    ReleaseMeta,
    UvConfig,
    cuda_of,
    exact_pin,
    linux_wheels,
    python_minors,
    read_release,
    requirements_of,
    serves_python,
    uv_config,
)
from verl_setup.maintenance.releases import new_releases, stable
from verl_setup.matrix.load import Matrix
from verl_setup.matrix.schema import (
    PythonSpec,
    Row,
)
from verl_setup.util.vocab import ROLLOUT_ENGINES, EngineName

# Pins taken from the resolution when no package pins them exactly, as today's rows carry them.
RESOLVED_PINS = ("torchvision", "torchaudio", "transformers", "ray", "tensordict", "numpy")


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """A release that cannot become a row, and why."""

    release: str
    reason: str


@dataclass(kw_only=True)
class ProposedRow:
    """A proposed row and where it was resolved."""

    row: Row
    resolved: dict[str, str] = field(default_factory=dict)  # "3.12 x86_64-manylinux_2_28" -> "ok" or why not


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

    def propose(self, since: str) -> tuple[list[ProposedRow], list[Refusal]]:
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
        candidates: list[ProposedRow] = []
        refused: list[Refusal] = []
        for verl, extra, engine, version in pairs:
            self.say(f"{engine} {version} with verl {verl.version}: reading metadata")
            outcome = self._candidate(verl, extra, engine, version)
            if isinstance(outcome, ProposedRow):
                candidates.append(outcome)
            else:
                refused.append(outcome)
        pinned_torch = {c.row.torch.version for c in candidates}
        for version in new_releases(self.index, "torch", since, self._covered("torch")):
            if version not in pinned_torch:
                reason = "no vllm or sglang release proposed here pins it (a row's torch is its engine's pin)"
                refused.append(Refusal(release=f"torch {version}", reason=reason))
        return candidates, refused

    def _lowest_floor(self, row: Row, minor: str, candidate: ProposedRow) -> tuple[Row, str] | None:
        """(the row at the lowest glibc where it resolves for this minor, uv's output), or None
        when it resolves at no glibc uv knows. The row's own floor first (as before), then the
        newest uv knows (fails: nowhere), then each floor upwards from the row's; a raised row's
        glibc is then the floor its resolved wheels need (maintenance/floors.py), as `matrix
        prove` computes it."""
        start = tuple(int(p) for p in row.requires.glibc.split("."))
        above = [f for f in UV_MANYLINUX if f > start]

        def attempt(glibc: tuple[int, ...]) -> tuple[Row, str | None]:
            at = _at_glibc(row, ".".join(map(str, glibc)))
            self.say(f"{row.id}: resolving for Python {minor} on {python_platform(at)}")
            code, out, err = resolve(at, self.matrix, self.uv, self.env, python=minor)
            candidate.resolved[f"{minor} {python_platform(at)}"] = "ok" if code == 0 else explain_failure(err)
            return at, (out if code == 0 else None)

        at, out = attempt(start)
        if out is not None:
            return at, out
        if not above:
            return None
        top, top_out = attempt(above[-1])
        if top_out is None:
            return None
        for glibc in above[:-1]:
            at, out = attempt(glibc)
            if out is not None:
                return self._with_floor(at, minor, out), out
        return self._with_floor(top, minor, top_out), top_out

    def _with_floor(self, row: Row, minor: str, out: str) -> Row:
        """The row with requires.glibc the floor its resolved wheels need, with the evidence."""
        pins = {n: v for n, (v, _) in resolution_of(out).items()}
        at_minor = dataclasses.replace(row, python=dataclasses.replace(row.python, recommended=minor))
        floor = row_floor(at_minor, self.matrix, pins, self.index)
        glibc = floor.glibc or row.requires.glibc
        evidence = dict(row.evidence)
        evidence["requires.glibc"] = (
            f"computed from the wheels resolved (binary-only) for Python {minor} on {self.today}: "
            f"glibc {glibc}, set by {', '.join(floor.set_by) or 'none'}; " + evidence["requires.glibc"]
        )
        return dataclasses.replace(
            row, requires=dataclasses.replace(row.requires, glibc=glibc), evidence=evidence
        )

    def _uv_config(self, version: str) -> UvConfig | None:
        if version not in self._configs:
            self._configs[version] = uv_config(self.index, "verl", version)
        return self._configs[version]

    def _newest_verl(self) -> ReleaseMeta | None:
        released = [
            v for v, r in self.index.releases("verl").items() if stable(v) is not None and r.yanked is None
        ]
        return read_release(self.index, "verl", str(max(Version(v) for v in released))) if released else None

    def _candidate(  # noqa: PLR0911  # one return per reason a pairing cannot be a row
        self, verl: ReleaseMeta, extra: str | None, engine: EngineName, version: str
    ) -> ProposedRow | Refusal:
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
        row = candidate_row(
            self.matrix,
            self.index,
            today=self.today,
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
                v for v, r in self.index.releases(key).items() if r.yanked is None and stable(v) is not None
            ]
            if not any(both.contains(v) for v in versions):
                side = f"verl {verl.version}" + (f"[{extra}]" if extra else "")
                return key, f"{name} needs {req.name}{req.specifier}, {side} allows {req.name}{allowed[key]}"
        return None

    def _resolve(self, row: Row, minors: list[str], name: str) -> ProposedRow | Refusal:
        """Resolve the oldest Python first (its ray/tensordict/numpy then install on every minor, as
        today's rows pin numpy for 3.10), at the lowest glibc floor where it resolves (installs are
        binary-only, so a dependency with only newer manylinux wheels raises the floor, as `matrix
        prove` computes it), then every other minor and architecture with the same pins."""
        candidate, supported = ProposedRow(row=row), list(minors)
        out, last = "", ""
        while supported:
            found = self._lowest_floor(row, supported[0], candidate)
            if found is not None:
                row, out = found
                break
            last = candidate.resolved[f"{supported[0]} {python_platform(row)}"]
            supported.pop(0)
        if not supported:
            return Refusal(
                release=name, reason=f"with verl {row.verl.version} it resolves for no Python minor: {last}"
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
        recommended = recommended_python(self.matrix, supported)
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


def _at_glibc(row: Row, glibc: str) -> Row:
    return dataclasses.replace(row, requires=dataclasses.replace(row.requires, glibc=glibc))


def _names(requirements: Sequence[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def _narrowed(override: str, packages: Mapping[str, str]) -> str:
    req = Requirement(override)
    name = canonicalize_name(req.name)
    pinned = next((v for k, v in packages.items() if canonicalize_name(k) == name), None)
    if pinned is None:
        return override
    return f"{req.name}=={pinned}" + (f" ; {req.marker}" if req.marker else "")

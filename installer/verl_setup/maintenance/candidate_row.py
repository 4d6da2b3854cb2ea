"""A candidate row built from its packages' own metadata, and that row as a person would write it.

Each pin carries where it came from: which release's metadata pins it, which wheels set the
glibc floor, which cuda.yaml rows give the driver floors.
"""

from __future__ import annotations

from typing import Any

from packaging.requirements import Requirement
from packaging.version import Version

from verl_setup.environment.index import Index
from verl_setup.maintenance.metadata import (
    ReleaseMeta,
    exact_pin,
    glibc_floor,
    linux_wheels,
    serves_python,
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
from verl_setup.util.versions import minor_of

FLASH_ATTN_MIN_CC = "8.0"


def candidate_row(
    matrix: Matrix,
    index: Index,
    *,
    today: str,
    verl: ReleaseMeta,
    extra: str | None,
    meta: ReleaseMeta,
    engine_reqs: list[Requirement],
    verl_reqs: list[Requirement],
    torch_meta: ReleaseMeta,
    cuda: tuple[str, str],
    minors: list[str],
) -> Row:
    """The candidate row for a pairing, every pin with where it came from (resolved pins come later)."""
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
    recommended = recommended_python(matrix, minors)
    minor = minor_of(recommended)
    torch_wheels = linux_wheels(index.releases("torch")[torch], "x86_64")
    engine_wheels = linux_wheels(index.releases(engine)[version], "x86_64")
    floors = [f for f in (glibc_floor(torch_wheels, minor), glibc_floor(engine_wheels, minor)) if f]
    glibc = max(floors, key=lambda f: tuple(int(p) for p in f.split("."))) if floors else "2.17"
    arch = ["x86_64"]
    if all(
        serves_python(linux_wheels(index.releases(n)[v], "aarch64"), minor_of(recommended))
        for n, v in (("torch", torch), (engine, version))
    ):
        arch.append("aarch64")
    rules, major = matrix.cuda, cuda[0].split(".")[0]
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
        id=_row_id(matrix, verl.version, engine, version),
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
            f"Proposed by `verl-setup matrix propose` on {today} from the packages' metadata; "
            "flash-attn is not pinned (install it in its own step, or --without flash-attn). "
            "Review, then `make prove`."
        ),
    )


def recommended_python(matrix: Matrix, minors: list[str]) -> str:
    """The exact Python: what today's rows recommend for the newest minor they share with it."""
    for minor in reversed(minors):
        for row in matrix.rows:
            if row.python.recommended.startswith(minor + "."):
                return row.python.recommended
    return f"{minors[-1]}.0"


def _row_id(matrix: Matrix, verl: str, engine: str, version: str) -> str:
    base = f"verl{minor_of(verl)}-{engine}{version}"
    taken = {r.id for r in matrix.rows}
    return base if base not in taken else f"{base}-proposed"


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

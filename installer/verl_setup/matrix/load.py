"""The one reader of matrices/: load, validate (file, row, key, with suggestions), cache."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from packaging.version import InvalidVersion, Version

from verl_setup.errors import BadInputError
from verl_setup.matrix.cache import cached
from verl_setup.matrix.closure import Closure, closure_for
from verl_setup.matrix.cuda import CudaRules
from verl_setup.matrix.proof import PROOF_FILE, Level, ProofBook, load_proof
from verl_setup.matrix.resolved import Resolution, load_resolved, resolved_path, target_key
from verl_setup.matrix.schema import CudaFile, Row, RowsFile
from verl_setup.util.bounded import one_line
from verl_setup.util.databuild import Builder
from verl_setup.util.paths import data_dir
from verl_setup.util.versions import DriverVersion, parse_minor
from verl_setup.util.vocab import suggest

SCHEMA = 1


@dataclass(frozen=True)
class Matrix:
    """A validated matrix: rows, their indexes, the CUDA rules, and a hash of the source."""

    path: Path
    rows_file: RowsFile
    cuda: CudaRules
    sha256: str

    @property
    def proof(self) -> ProofBook:
        """The proof record beside the rows file, as it is on disk now (`matrix prove` rewrites it)."""
        return _proof(self.path, _stamp(self.path.parent / PROOF_FILE))

    def proof_of(self, row: Row) -> tuple[Level | None, str]:
        """The proof level the row reached (None: unproven) and the words for it."""
        return self.proof.for_row(row)

    def proof_json(self, row: Row) -> dict[str, object]:
        """`proof` of plan/matrix --json: level, detail, and whether the whole stack was proven."""
        level, detail = self.proof_of(row)
        record = self.proof.rows.get(row.id)
        left_out = record.left_out() if record is not None and level is not None else []
        return {"level": level, "detail": detail, "whole_stack": not left_out, "left_out": left_out}

    def proof_words(self, row: Row) -> str:
        """`imports`, or `imports (without flash-attn)` for a row proven with a reduced stack."""
        from verl_setup.matrix.proof import words  # noqa: PLC0415

        level, _ = self.proof_of(row)
        record = self.proof.rows.get(row.id)
        return "-" if level is None or record is None else words(level, record.left_out())

    def resolution(self, row: Row) -> Resolution | None:
        """The row's recorded resolution (resolved.yaml beside the rows file), while it is for the
        row as it stands now; an edited row has none until it is resolved again."""
        found = _resolutions(self.path, _stamp(resolved_path(self.path))).get(row.id)
        return found if found is not None and found.row_sha256 == row.content_hash() else None

    def closure(self, row: Row, python: str, arch: str | None) -> Closure:
        """What an install of the row holds its transitive packages to, for this Python and arch."""
        found = self.resolution(row)
        target_arch = arch or row.requires.arch[0]
        pins = None if found is None else found.pins_for(target_key(python, target_arch))
        return closure_for(
            pins,
            row=row.id,
            python=python,
            arch=target_arch,
            recorded=None if found is None else found.recorded,
            as_of=None if found is None else found.as_of,
            level=self.proof_words(row),
            any_recorded=found is not None,
            dated_index=self.index_url(row) is None,
        )

    @property
    def rows(self) -> tuple[Row, ...]:
        """Rows in file order (earlier rows win ties in selection)."""
        return self.rows_file.rows

    def row(self, row_id: str) -> Row:
        """Look a row up by id; BadInputError suggests the nearest id."""
        for row in self.rows:
            if row.id == row_id:
                return row
        hint = suggest(row_id, [r.id for r in self.rows])
        raise BadInputError(f"no row {row_id!r} in {self.path}{hint}")

    def index_url(self, row: Row) -> str | None:
        """URL of the index serving the row's torch, or None for the default index."""
        if row.torch.index == "default":
            return None
        return self.rows_file.indexes[row.torch.index].url


def _stamp(path: Path) -> tuple[int, int]:
    try:
        info = path.stat()
    except OSError:
        return (0, 0)
    return (info.st_mtime_ns, info.st_size)


@lru_cache(maxsize=8)
def _resolutions(rows_path: Path, _stamp: tuple[int, int]) -> dict[str, Resolution]:
    path = resolved_path(rows_path)
    return cached("resolved", (path,), dict, lambda: load_resolved(rows_path)) if path.exists() else {}


@lru_cache(maxsize=8)
def _proof(rows_path: Path, _stamp: tuple[int, int]) -> ProofBook:
    return cached("proof", (rows_path.parent / PROOF_FILE,), ProofBook, lambda: load_proof(rows_path))


def default_matrix_path() -> Path:
    """matrices/verl.yaml of this installation."""
    return data_dir("matrices") / "verl.yaml"


def load_matrix(path: Path | None = None) -> Matrix:
    """Load and validate a rows file (and the cuda.yaml beside it, else the bundled one)."""
    return _load(Path(path or default_matrix_path()).resolve())


@lru_cache(maxsize=4)
def _load(path: Path) -> Matrix:
    return cached("matrix", (path, cuda_path_for(path)), Matrix, lambda: _parse(path))


def _parse(path: Path) -> Matrix:
    problems, matrix = check(path)
    if matrix is None:
        more = (
            f" (and {len(problems) - 1} more; run `verl-setup matrix validate`)" if len(problems) > 1 else ""
        )
        raise BadInputError(problems[0] + more)
    return matrix


def cuda_path_for(rows_path: Path) -> Path:
    """A user's matrix may bring its own cuda.yaml; otherwise the bundled one applies."""
    beside = rows_path.parent / "cuda.yaml"
    return beside if _is_file(beside) else data_dir("matrices") / "cuda.yaml"


def _is_file(path: Path) -> bool:
    """Path.is_file, but False (not OSError) for a name too long or with a NUL byte."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def validate(path: Path) -> tuple[list[str], Matrix | None]:
    """`matrix validate`: check()'s problems, then each row whose glibc is below the floor its
    wheels were last computed to need (matrices/resolved.yaml)."""
    from verl_setup.matrix.resolved import floor_problems  # noqa: PLC0415  # only validate needs it

    problems, matrix = check(path)
    if matrix is not None:
        problems += floor_problems(matrix.rows, path)
    return problems, matrix


def check(path: Path) -> tuple[list[str], Matrix | None]:
    """Every problem in a rows file and its CUDA facts, and the Matrix when there are none."""
    from verl_setup.util.yamlread import YamlError, read_yaml  # noqa: PLC0415  # a cached matrix needs no YAML

    if not _is_file(path):
        return [f"{one_line(str(path))}: no such matrix file"], None
    try:
        cuda_data, _ = read_yaml(cuda_path_for(path))
        rows_data, raw = read_yaml(path)
    except YamlError as exc:
        return [str(exc)], None
    cuda_builder = Builder(str(cuda_path_for(path)))
    cuda_file = cuda_builder.build(CudaFile, cuda_data, "", 1)
    builder = Builder(str(path))
    rows_file = builder.build(RowsFile, rows_data, "", 1)
    problems = cuda_builder.problems + builder.problems
    if cuda_file is not None:
        problems += _check_cuda(cuda_file, str(cuda_path_for(path)))
    if cuda_file is not None and rows_file is not None:
        problems += _check_rows(rows_file, CudaRules(cuda_file), str(path))
    if problems or cuda_file is None or rows_file is None:
        return problems, None
    try:
        _proof(path, _stamp(path.parent / PROOF_FILE))  # a broken record is reported like the rest; cached
    except BadInputError as exc:
        return [str(exc)], None
    return [], Matrix(path, rows_file, CudaRules(cuda_file), hashlib.sha256(raw).hexdigest())


def _check_cuda(facts: CudaFile, file: str) -> list[str]:
    problems = []
    tables = (
        ("families", facts.families),
        ("toolkits", facts.toolkits),
        ("windows_families", facts.windows_families),
    )
    for table_name, table in tables:
        for key, entry in table.items():
            try:
                DriverVersion.parse(entry.min_driver)
            except BadInputError as exc:
                problems.append(f"{file}: {table_name}.{key}.min_driver: {exc}")
            if entry.source not in facts.sources:
                problems.append(f"{file}: {table_name}.{key}.source: unknown source {entry.source!r}")
    return problems


def _check_rows(rows_file: RowsFile, rules: CudaRules, file: str) -> list[str]:  # noqa: PLR0912
    problems: list[str] = []
    seen: set[str] = set()
    if rows_file.schema != SCHEMA:
        problems.append(f"{file}: schema {rows_file.schema} is not {SCHEMA}")
    problems += _check_extensions(rows_file, file)
    for row in rows_file.rows:
        where = f"{file}:{row.line}: row {row.id!r}"

        def bad(key: str, message: str, where: str = where, out: list[str] = problems) -> None:
            out.append(f"{where}: {key}: {message}")

        if row.id in seen:
            bad("id", "duplicate row id")
        seen.add(row.id)
        for key, version in (
            [("verl.version", row.verl.version), ("torch.version", row.torch.version)]
            + [(f"packages.{name}", v) for name, v in row.packages.items()]
            + ([("engine.version", row.engine.version)] if row.engine.version else [])
        ):
            try:
                Version(version)
            except InvalidVersion:
                bad(key, f"{version!r} is not an exact version")
        if (row.engine.name == "none") != (row.engine.version is None):
            bad("engine", "name 'none' goes with version null, and only then")
        for minor in row.python.supported:
            try:
                parse_minor(minor, "Python minor")
            except BadInputError as exc:
                bad("python.supported", str(exc))
        rec = row.python.recommended.split(".")
        if len(rec) != 3 or ".".join(rec[:2]) not in row.python.supported:
            bad(
                "python.recommended",
                f"{row.python.recommended!r} must be X.Y.Z with X.Y in supported",
            )
        if row.torch.index != "default" and row.torch.index not in rows_file.indexes:
            bad("torch.index", f"unknown index {row.torch.index!r}; define it under indexes:")
        problems += [f"{where}: {m}" for m in _check_requires(row, rules)]
        needed = {"verl", "engine", "torch", "python", "requires.glibc", *row.packages}
        if row.requires.driver:
            needed.add("requires.driver")
        if row.requires.arch != ("x86_64",):
            needed.add("requires.arch")  # every platform but the usual one says where it comes from
        if row.requires.compute_capability:
            needed.add("requires.compute_capability")
        if row.overrides:
            needed.add("overrides")
        if row.requires.accelerator:  # an Ascend/ROCm row says where its chips and toolkit come from
            needed |= {"requires.chips", "requires.toolkit"}
        if row.no_deps:
            needed.add("no_deps")
        if row.sources:
            needed.add("sources")
        for name in (*row.no_deps, *row.sources):
            if name not in row.packages:
                bad(
                    "no_deps" if name in row.no_deps else "sources",
                    f"{name!r} is not one of the row's packages",
                )
        for key in sorted(needed - set(row.evidence)):
            bad("evidence", f"no evidence for {key!r}")
        for key in sorted(set(row.evidence) - needed):
            hint = suggest(key, sorted(needed))
            bad("evidence", f"evidence for {key!r}, which the row does not pin{hint}")
    return problems


def _check_extensions(rows_file: RowsFile, file: str) -> list[str]:
    out = list[str]()
    for name, facts in rows_file.torch_extensions.items():
        where = f"{file}: torch_extensions.{name}"
        for field_name in ("version", "cuda_major", "abi", "py", "arch"):
            if facts.url is not None and "{" + field_name + "}" not in facts.url:
                out.append(f"{where}.url: no {{{field_name}}} placeholder")
        if facts.releases and facts.url is None:
            out.append(f"{where}: releases are listed but there is no url pattern")
        if facts.whole is not None and facts.whole not in facts.companions:
            out.append(f"{where}.whole: {facts.whole!r} is not among its companions (what it replaces)")
        for version, release in facts.releases.items():
            try:
                Version(version)
                parse_minor(release.glibc, "glibc version")
            except (InvalidVersion, BadInputError) as exc:
                out.append(f"{where}.releases.{version}: {exc}")
        for prefix in facts.without:
            if not all(p.isdigit() for p in prefix.split(".")):
                out.append(f"{where}.without.{prefix}: not a verl version prefix like 0.9")
    out += _check_sources(rows_file, file)
    for unfit in rows_file.unfit:
        for version in unfit.versions:
            try:
                Version(version)
            except InvalidVersion:
                out.append(f"{file}: unfit: {version!r} is not an exact version")
    return out


def _check_sources(rows_file: RowsFile, file: str) -> list[str]:
    """Wheel sources: unique ids; release assets name a package with a URL pattern; an index that
    is enabled has a URL whose only placeholders are {cuda_tag} and {torch_minor}."""
    out, seen = list[str](), set[str]()
    for source in rows_file.wheel_sources:
        where = f"{file}:{source.line}: wheel_sources[{source.id}]"
        if source.id in seen:
            out.append(f"{where}: id: duplicate source id")
        seen.add(source.id)
        if source.kind == "release-assets":
            for name in source.packages:
                facts = rows_file.torch_extensions.get(name)
                if facts is None or facts.url is None:
                    out.append(f"{where}: packages: {name!r} has no url pattern under torch_extensions")
            continue
        if source.url is None and source.enabled:
            out.append(f"{where}: url: an enabled index needs a url")
        try:
            (source.url or "").format(cuda_tag="cu130", torch_minor="2.11")
        except (KeyError, IndexError, ValueError) as exc:
            out.append(f"{where}: url: only {{cuda_tag}} and {{torch_minor}} may be filled in ({exc})")
        for served in source.serves:
            try:
                parse_minor(served.glibc, "glibc version")
                for version in (v for versions in served.packages.values() for v in versions):
                    Version(version)
            except (InvalidVersion, BadInputError) as exc:
                out.append(f"{where}: serves: {exc}")
    return out


def _check_requires(row: Row, rules: CudaRules) -> list[str]:
    req, out = row.requires, []
    try:
        parse_minor(req.glibc, "glibc version")
    except BadInputError as exc:
        out.append(f"requires.glibc: {exc}")
    if not req.gpu:
        if row.torch.cuda or req.cuda or req.driver or req.compute_capability:
            out.append("requires: a row with gpu: false states no cuda, driver or compute_capability")
        return out
    if row.engine.name == "none":
        out.append("engine: a GPU row needs an engine")
    if not (req.cuda and req.driver and req.compute_capability and row.torch.cuda):
        return [
            *out,
            "requires: a GPU row states cuda, driver and compute_capability, and torch.cuda",
        ]
    if parse_minor(req.cuda, "CUDA") < parse_minor(row.torch.cuda, "CUDA"):
        out.append(f"requires.cuda: {req.cuda} is older than torch's CUDA {row.torch.cuda}")
    floor, full = rules.family_floor(req.cuda), rules.full_support(req.cuda)
    if floor is None or full is None:
        return [*out, f"requires.cuda: CUDA {req.cuda} is not in cuda.yaml"]
    try:
        compat, strict = DriverVersion.parse(req.driver.compat), DriverVersion.parse(req.driver.strict)
    except BadInputError as exc:  # listed with every other problem, not raised alone
        return [*out, f"requires.driver: {exc}"]
    if compat < floor:
        out.append(f"requires.driver.compat: {compat} is below CUDA {req.cuda}'s family floor {floor}")
    if strict < full:
        out.append(f"requires.driver.strict: {strict} is below CUDA {req.cuda}'s full-support driver {full}")
    if strict < compat:
        out.append("requires.driver: strict must not be below compat")
    cc_min = parse_minor(req.compute_capability.min, "compute capability")
    cc_max = parse_minor(req.compute_capability.max, "compute capability")
    if cc_min > cc_max:
        out.append("requires.compute_capability: min is above max")
    return out

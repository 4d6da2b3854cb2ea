"""What was shown for each row (matrices/proof.yaml): resolves, installs, imports, trains, gpu.

The record is written by `verl-setup matrix prove` (`make prove`), never by hand, and is kept
apart from the rows so that proving a row does not change its hash. An entry proves the row only
while the row's content hash is the one it was proven with; an edited row is unproven again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_setup.errors import BadInputError
from verl_setup.matrix.schema import Row
from verl_setup.util.vocab import PROOF_LEVELS, ProofLevel

Level = ProofLevel
LEVELS = PROOF_LEVELS
PROOF_FILE = "proof.yaml"


@dataclass(frozen=True, kw_only=True)
class ProofStep:
    """One proof step: when, with which tool versions, on what, and what it measured."""

    date: str
    tool: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class RowProof:
    """The proof steps recorded for one row, and the row hash they were recorded against."""

    row_sha256: str
    steps: dict[str, ProofStep]
    failed: str | None = None  # the step that failed last time, and why
    stopped: str | None = None  # why the proof could not go further where it ran (not a failure)

    def left_out(self) -> list[str]:
        """The packages built against torch the install was proven without (a reduced stack):
        the installs step's `extensions` record, or the older `NAME: "left out: ..."` entries."""
        installs = self.steps.get("installs")
        if installs is None:
            return []
        modes = installs.detail.get("extensions")
        if isinstance(modes, dict):
            return sorted(n for n, e in modes.items() if isinstance(e, dict) and e.get("mode") == "without")
        return sorted(
            k for k, v in installs.detail.items() if isinstance(v, str) and v.startswith("left out")
        )

    def level(self) -> Level | None:
        """The highest level reached with every level below it also reached."""
        reached: Level | None = None
        for level in LEVELS:
            if level not in self.steps:
                break
            reached = level
        return reached


def words(level: Level | None, left_out: list[str]) -> str:
    """`imports` for the whole stack; `imports (without flash-attn)` for a reduced one."""
    if level is None:
        return "unproven"
    if left_out and rank(level) >= rank("installs"):
        return f"{level} (without {', '.join(left_out)})"
    return level


def rank(level: Level | None) -> int:
    """0 for unproven, 5 for gpu (higher is better proven)."""
    return 0 if level is None else LEVELS.index(level) + 1


@dataclass(frozen=True)
class ProofBook:
    """Every row's proof, read from proof.yaml beside the rows file (empty when there is none)."""

    path: Path
    rows: dict[str, RowProof]

    def for_row(self, row: Row) -> tuple[Level | None, str]:
        """(level, words): the level this row reached, or None with the reason."""
        proof = self.rows.get(row.id)
        if proof is None:
            return None, "never proven"
        if proof.row_sha256 != row.content_hash():
            return None, "proof is stale: the row changed after it was proven"
        level = proof.level()
        gpu = "" if "gpu" in proof.steps else "; gpu: no run on a GPU host recorded"
        if level is None:
            return None, f"not proven ({proof.failed or 'no step recorded'})"
        date = proof.steps[level].date
        trains = proof.steps.get("trains")
        where = f"; trained on {trains.detail['host']}" if trains and trains.detail.get("host") else ""
        failed = f"; last failure: {proof.failed}" if proof.failed else ""
        stopped = f"; not further: {proof.stopped}" if proof.stopped else ""
        return level, f"{words(level, proof.left_out())} (proven {date}){where}{stopped}{gpu}{failed}"


def floor_setters(book: ProofBook, row: Row) -> list[str]:
    """The distributions `matrix prove` found to set the row's glibc floor (its proof's `resolves`
    step; empty when the proof is missing or stale)."""
    proof = book.rows.get(row.id)
    if proof is None or proof.row_sha256 != row.content_hash() or "resolves" not in proof.steps:
        return []
    return [str(s) for s in proof.steps["resolves"].detail.get("glibc_floor_set_by") or ()]


def load_proof(rows_path: Path) -> ProofBook:
    """proof.yaml beside a rows file; a missing file is an empty book, a broken one exit 2."""
    # A cached record needs no YAML parser: imported only here.
    from verl_setup.util.yamlread import YamlError, read_yaml  # noqa: PLC0415

    path = rows_path.parent / PROOF_FILE
    if not path.exists() and not path.is_symlink():
        return ProofBook(path=path, rows={})
    try:
        data = read_yaml(path)[0] or {}
        rows = {
            str(row_id): RowProof(
                row_sha256=str(entry["row_sha256"]),
                steps={
                    str(name): ProofStep(
                        date=str(e["date"]), tool=str(e["tool"]), detail=dict(e.get("detail") or {})
                    )
                    for name, e in (entry.get("steps") or {}).items()
                    if name in LEVELS
                },
                failed=entry.get("failed"),
                stopped=entry.get("stopped"),
            )
            for row_id, entry in (data.get("rows") or {}).items()
        }
    except (YamlError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise BadInputError(f"{path}: not a proof record ({exc}); regenerate it with `make prove`") from exc
    return ProofBook(path=path, rows=rows)


def record(
    book: ProofBook, row: Row, steps: dict[str, ProofStep], failed: str | None, stopped: str | None = None
) -> ProofBook:
    """Write one row's new proof into the book's file (atomically) and return the new book.

    Steps carried over from an earlier proof of the same row hash survive (a `gpu` step recorded
    on a GPU host is not lost when the CPU-side proof is re-run), unless a step below them failed.
    """
    earlier = book.rows.get(row.id)
    merged: dict[str, ProofStep] = {}
    if earlier is not None and earlier.row_sha256 == row.content_hash() and failed is None:
        merged.update(earlier.steps)
    merged.update(steps)
    rows = dict(book.rows)
    rows[row.id] = RowProof(row_sha256=row.content_hash(), steps=merged, failed=failed, stopped=stopped)
    data = {
        "schema": 1,
        "rows": {
            row_id: {
                "row_sha256": p.row_sha256,
                **({"failed": p.failed} if p.failed else {}),
                **({"stopped": p.stopped} if p.stopped else {}),
                "steps": {
                    name: {"date": e.date, "tool": e.tool, "detail": _plain(e.detail)}
                    for name, e in sorted(p.steps.items(), key=lambda kv: LEVELS.index(kv[0]))
                },
            }
            for row_id, p in sorted(rows.items())
        },
    }
    header = "# Written by `verl-setup matrix prove` (make prove); do not edit by hand.\n"
    tmp = book.path.with_name(f".{book.path.name}.{os.getpid()}.tmp")
    from verl_setup.util.yamlread import dump_yaml  # noqa: PLC0415

    tmp.write_text(header + dump_yaml(data, width=100), encoding="utf-8")
    tmp.replace(book.path)
    return ProofBook(path=book.path, rows=rows)


def today() -> str:
    """The date a proof step is recorded with (UTC)."""
    import datetime  # noqa: PLC0415  # only `matrix prove` records dates

    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


def _plain(detail: dict[str, Any]) -> dict[str, Any]:
    """Only JSON-able values go into the record."""
    import json  # noqa: PLC0415  # only `matrix prove` writes records

    return dict(json.loads(json.dumps(detail, default=str)))

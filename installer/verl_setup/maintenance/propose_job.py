"""`matrix propose`'s use case: candidate rows for releases newer than the matrix, as a rows file.

propose_rows(request, env, progress) -> Proposal: uv and its index, the default `since` (the
newest upload among the releases the matrix pins), maintenance/propose.py's Proposer, and the
candidates written to a new file for review when asked (never matrices/ itself).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_setup.environment.index import masked
from verl_setup.environment.uv import uv_and_env
from verl_setup.errors import BadInputError
from verl_setup.maintenance.candidate_row import row_data
from verl_setup.maintenance.check import default_index
from verl_setup.maintenance.propose import ProposedRow, Proposer, Refusal
from verl_setup.maintenance.releases import default_since
from verl_setup.matrix.load import Matrix
from verl_setup.output import Progress
from verl_setup.util.yamlread import dump_yaml


@dataclass(frozen=True, kw_only=True)
class ProposeRequest:
    """Releases uploaded after `since` (None: the newest release the matrix pins), written to
    `out_file` (a new file) when given."""

    matrix: Matrix
    since: str | None = None
    out_file: Path | None = None


@dataclass(frozen=True, kw_only=True)
class Proposal:
    """The candidates and refusals, the index asked, and the rows file's text."""

    since: str
    index_url: str
    candidates: tuple[ProposedRow, ...]
    refused: tuple[Refusal, ...]
    text: str
    out_file: Path | None

    def to_json(self) -> dict[str, Any]:
        """The --json data (the envelope's)."""
        return {
            "since": self.since,
            "index": masked(self.index_url),
            "candidates": [{"row": row_data(c.row), "resolved": c.resolved} for c in self.candidates],
            "refused": [{"release": r.release, "reason": r.reason} for r in self.refused],
            "out": None if self.out_file is None else str(self.out_file),
        }


def rows_text(
    candidates: Sequence[ProposedRow], refused: Sequence[Refusal], *, since: str, today: str
) -> str:
    """The candidates as a rows file (schema 1) that `matrix validate` reads, refusals as comments."""
    lines = [
        f"# ProposedRow rows from `verl-setup matrix propose --since {since}` on {today},",
        "# against the index uv is configured with.",
        "# For review: nothing here is proven. Copy the rows you accept into matrices/verl.yaml, then",
        '# `make prove ROW="id ..."` and commit the rows with matrices/proof.yaml.',
    ]
    for c in candidates:
        where = "; ".join(f"{k}: {v}" for k, v in c.resolved.items())
        lines.append(f"# {c.row.id} resolved: {where}")
    lines += [f"# refused {r.release}: {r.reason}" for r in refused] or ["# refused: none"]
    body = dump_yaml({"schema": 1, "rows": [row_data(c.row) for c in candidates]}, width=120)
    return "\n".join(lines) + "\n" + body


def propose_rows(request: ProposeRequest, env: Mapping[str, str], progress: Progress) -> Proposal:
    """Propose rows for releases after `since`; write them to `out_file` when given."""
    matrix, since, out_file = request.matrix, request.since, request.out_file
    uv, uv_environment = uv_and_env(env, progress.say)
    index = default_index(uv, uv_environment)
    if since is None:
        since = default_since(matrix, index)
        progress.say(f"--since {since}: the newest upload among the releases the matrix pins")
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    proposer = Proposer(matrix, index, uv=uv, env=uv_environment, today=today, say=progress.say)
    candidates, refused = proposer.propose(since)
    text = rows_text(candidates, refused, since=since, today=today)
    if out_file is not None:
        try:
            out_file.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise BadInputError(f"cannot write {out_file}: {exc.strerror or exc}") from exc
        progress.say(f"wrote {len(candidates)} candidate rows to {out_file}")
    return Proposal(
        since=since,
        index_url=index.url,
        candidates=tuple(candidates),
        refused=tuple(refused),
        text=text,
        out_file=out_file,
    )

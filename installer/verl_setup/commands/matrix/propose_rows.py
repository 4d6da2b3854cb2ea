"""`verl-setup matrix propose`: print or write candidate rows (a file to review, never matrices/ itself)."""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from verl_setup.environment.index import masked
from verl_setup.environment.uv import uv_and_env
from verl_setup.errors import BadInputError
from verl_setup.maintenance.candidate_row import row_data
from verl_setup.maintenance.check import default_index
from verl_setup.maintenance.propose import ProposedRow, Proposer, Refusal
from verl_setup.maintenance.releases import default_since
from verl_setup.matrix.load import Matrix
from verl_setup.output import Progress, envelope
from verl_setup.util.yamlread import dump_yaml

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _is_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return bool(_DATE.match(text))


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


def command(
    matrix: Matrix,
    *,
    since: str | None,
    out_file: Path | None,
    json_out: bool,
    env: Mapping[str, str],
    out: TextIO,
    quiet: bool = False,
) -> int:
    """Propose rows for releases after `since` (default: the newest release the matrix pins)."""
    if since is not None and not _is_date(since):
        raise BadInputError(f"--since {since!r}: give a date as YYYY-MM-DD")
    if out_file is not None and out_file.exists():
        raise BadInputError(f"--out {out_file} exists; propose writes only a new file, for review")
    progress = Progress(quiet=quiet)
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
    if json_out:
        data = {
            "since": since,
            "index": masked(index.url),
            "candidates": [{"row": row_data(c.row), "resolved": c.resolved} for c in candidates],
            "refused": [{"release": r.release, "reason": r.reason} for r in refused],
            "out": None if out_file is None else str(out_file),
        }
        out.write(envelope("matrix propose", data))
    elif out_file is None:
        out.write(text)
    else:
        out.write(f"{len(candidates)} candidates, {len(refused)} refused; see {out_file}\n")
    return 0

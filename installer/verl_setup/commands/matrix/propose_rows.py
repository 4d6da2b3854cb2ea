"""`verl-setup matrix propose`: print or write candidate rows (a file to review, never matrices/ itself).

Flags -> ProposeRequest -> maintenance.propose_job.propose_rows -> print."""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.errors import BadInputError
from verl_setup.maintenance.propose_job import ProposeRequest, propose_rows
from verl_setup.matrix.load import Matrix
from verl_setup.output import Progress, envelope

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _is_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return bool(_DATE.match(text))


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
    request = ProposeRequest(matrix=matrix, since=since, out_file=out_file)
    proposal = propose_rows(request, env, Progress(quiet=quiet))
    if json_out:
        out.write(envelope("matrix propose", proposal.to_json()))
    elif out_file is None:
        out.write(proposal.text)
    else:
        out.write(f"{len(proposal.candidates)} candidates, {len(proposal.refused)} refused; see {out_file}\n")
    return 0

"""The columns of the launch's parquet files, read by pyarrow in the target env (schema only).

verl reads its datasets with pyarrow through `datasets`, so the target env has it; only the
footer is read (pyarrow.parquet.read_schema), never the rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from verl_setup.scripts import script_path
from verl_setup.util.runner import ProgramError, run

SCHEMA_TIMEOUT = 30.0


def parquet_columns(python: str, files: Sequence[str], env: Mapping[str, str]) -> dict[str, list[str] | str]:
    """file -> its column names, or why they could not be read ("" -> why none could)."""
    if not files:
        return {}
    try:
        out = run([python, str(script_path("parquet_schema")), *files], timeout=SCHEMA_TIMEOUT, env=env)
        found: dict[str, list[str] | str] = json.loads(out.stdout or "{}")
    except (ProgramError, json.JSONDecodeError) as exc:
        return {"": f"the schema reader failed: {exc}"}
    return found

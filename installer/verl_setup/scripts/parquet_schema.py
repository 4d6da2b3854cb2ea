"""doctor's launch lint: the column names of parquet files, read by the target env's pyarrow from
the footer only (argv: FILE...; JSON file -> names or why not, "" -> why none could be read)."""

from __future__ import annotations

import json
import sys

out: dict[str, list[str] | str] = {}
try:
    import pyarrow.parquet as pq  # type: ignore[import-not-found, unused-ignore]
except ImportError as exc:
    sys.stdout.write(json.dumps({"": "cannot import pyarrow: %s" % exc}))
    sys.exit(0)
for path in sys.argv[1:]:
    try:
        out[path] = pq.read_schema(path).names
    except Exception as exc:
        out[path] = "%s: %s" % (type(exc).__name__, exc)
sys.stdout.write(json.dumps(out))

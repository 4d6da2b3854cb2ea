"""The JSON contract as the tests check it: every --json envelope against envelope.json, and its
data against the command's published schema (verl_setup/schemas/COMMAND.json). `json_data` in
tests/conftest.py runs every envelope a test reads through `valid`."""

from __future__ import annotations

import functools
import json
from typing import Any

from verl_setup.output import schema_path


@functools.cache
def _validator(name: str) -> Any:
    import jsonschema  # noqa: PLC0415  # a test dependency, loaded by the tests that read JSON

    schema = json.loads(schema_path(name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def valid(doc: dict[str, Any]) -> dict[str, Any]:
    """The envelope checked against envelope.json and its data against the command's schema."""
    _validator("envelope").validate(doc)
    if doc["data"] is not None:
        _validator(doc["command"]).validate(doc["data"])
    return doc

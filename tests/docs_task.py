"""tasks/gen_docs.py, imported by path (it is a build task, not part of the package)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

TASK = Path(__file__).parents[1] / "tasks" / "gen_docs.py"


def gen_docs() -> ModuleType:
    if "gen_docs" not in sys.modules:
        spec = importlib.util.spec_from_file_location("gen_docs", TASK)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["gen_docs"] = module
        spec.loader.exec_module(module)
    return sys.modules["gen_docs"]


def committed_grid() -> dict[str, Any]:
    """docs/assets/selector-data.js as data."""
    text = gen_docs().GRID_FILE.read_text(encoding="utf-8")
    prefix = "window.VERL_SETUP_GRID = "
    assert text.startswith(prefix)
    data = json.loads(text[len(prefix) :].rstrip().rstrip(";"))
    assert isinstance(data, dict)
    return data

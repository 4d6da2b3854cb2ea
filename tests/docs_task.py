"""tasks/gen_docs.py and tasks/gen_completion.py, imported by path (build tasks, not part of the package)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

TASKS = Path(__file__).parents[1] / "tasks"


def task(name: str) -> ModuleType:
    """tasks/NAME.py, loaded once."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TASKS / f"{name}.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def gen_docs() -> ModuleType:
    return task("gen_docs")


def gen_completion() -> ModuleType:
    return task("gen_completion")


def committed_grid() -> dict[str, Any]:
    """docs/assets/selector-data.js as data."""
    text = gen_docs().GRID_FILE.read_text(encoding="utf-8")
    prefix = "window.VERL_SETUP_GRID = "
    assert text.startswith(prefix)
    data = json.loads(text[len(prefix) :].rstrip().rstrip(";"))
    assert isinstance(data, dict)
    return data

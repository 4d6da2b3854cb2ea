"""The one place that knows where matrices/ and templates/ live (wheel or source checkout), and
where verl-setup keeps its caches."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # verl_setup/, above util/


def data_dir(name: str) -> Path:
    """Return the directory `name` ("matrices" or "templates") for this installation."""
    packaged = _PACKAGE / "_data" / name  # a built wheel (see pyproject force-include)
    if packaged.is_dir():
        return packaged
    checkout = _PACKAGE.parent.parent / name  # an editable install or a source tree
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"verl-setup data folder {name!r} is missing from this installation")


def tool_cache_dir(env: Mapping[str, str] = os.environ) -> Path:
    """$VERL_SETUP_CACHE_DIR, else $XDG_CACHE_HOME/verl-setup, else ~/.cache/verl-setup."""
    if env.get("VERL_SETUP_CACHE_DIR"):
        return Path(env["VERL_SETUP_CACHE_DIR"])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "verl-setup"

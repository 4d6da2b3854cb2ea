"""The one place that knows where matrices/ and templates/ live (wheel or source checkout)."""

from __future__ import annotations

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

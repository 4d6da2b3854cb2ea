"""The unit tests' tripwire: a real subprocess fails the test unless it is marked `subprocess`
(as cibuildwheel's unit tests do). Probes are fed recorded outputs here; programs run in
tests/integration."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _no_real_subprocess(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("subprocess") is not None:
        return

    def refuse(*args: Any, **_kwargs: Any) -> None:
        argv = args[0] if args else "?"
        raise AssertionError(
            f"unit test ran a real program {argv!r}: feed a recording, or mark it `subprocess`"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)

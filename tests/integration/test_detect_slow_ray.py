"""`verl-setup detect` as a user runs it, with a `ray` on PATH that takes 10 s to answer (Ray's CLI
took 2.7 to 5.1 s on a loaded host, past the probe deadline): ray's version comes from its
metadata, the stand-in never runs, and detect takes no longer than without it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import json_data
from tests.unit.test_detect import slow_ray


def detect(path: str) -> tuple[float, dict[str, object]]:
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "verl_setup", "detect", "--json"],
        capture_output=True, text=True, timeout=60, check=False, env={**os.environ, "PATH": path},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return time.monotonic() - start, json_data(result.stdout)


def test_detect_with_a_slow_ray_on_path_returns_in_its_usual_time(tmp_path: Path) -> None:
    mark = slow_ray(tmp_path / "venv", "2.58.0")
    usual, _ = detect(os.environ["PATH"])
    seconds, data = detect(f"{tmp_path / 'venv/bin'}:{os.environ['PATH']}")
    tools = {t["name"]: t for t in data["tools"]}  # type: ignore[attr-defined]
    assert (tools["ray"]["version"], tools["ray"]["path"]) == ("2.58.0", str(tmp_path / "venv/bin/ray"))
    assert not mark.exists()  # `ray --version` never ran
    assert seconds < usual + 3  # a loaded machine's jitter; running the stand-in alone takes 10 s

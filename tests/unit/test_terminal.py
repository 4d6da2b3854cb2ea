"""K1: control characters and line breaks from inputs never reach the terminal raw: log lines and
file names in diagnose, a stray file name in a bundle, a cluster file's missing-node reason,
progress lines; --json stays valid."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.conftest import host, run_cli
from tests.unit.test_bundle import _fa_bundle
from tests.unit.test_plan_cluster import cluster_file
from verl_setup.host.cluster_file import MissingNode
from verl_setup.output import Progress
from verl_setup.util.terminal import neutral

TITLE = "\x1b]0;PWNED\x07"  # OSC 0: sets the window title
CLEAR = "\x1b[2J"
FAKE = "\nverl-setup: done: everything is fine"


def _no_raw_controls(text: str) -> None:
    assert "\x1b" not in text
    assert "\x07" not in text
    assert "\r" not in text
    assert "\x9b" not in text  # C1 CSI
    assert "\nverl-setup: done" not in text


def test_neutral_escapes_controls_and_keeps_newlines_and_tabs() -> None:
    assert neutral(f"a{TITLE}b\tc\nd\r\x9b") == "a\\x1b]0;PWNED\\x07b\tc\nd\\x0d\\u009b"


@pytest.mark.subprocess  # diagnose reads dmesg
def test_diagnose_evidence_and_file_names_are_neutral(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / f"worker{TITLE}{FAKE}.log").write_text(
        f"{TITLE}{CLEAR}ModuleNotFoundError: No module named 'flash_attn'\x9b31m\r{FAKE}\n"
    )
    for argv in (("diagnose", str(run)), ("diagnose", "--json", str(run))):
        done = run_cli(*argv)
        _no_raw_controls(done.out + done.err)
    again = run_cli("diagnose", "--json", str(run))
    assert again.code == 0, again.err
    data = json.loads(again.out)
    assert data["command"] == "diagnose"


def test_a_stray_bundle_file_name_cannot_split_the_error_line(tmp_path: Path) -> None:
    root = _fa_bundle(tmp_path / "b")
    (root / "wheels" / f"x{TITLE}{CLEAR}{FAKE}.whl").write_bytes(b"")
    done = run_cli("install", "--offline", str(root), "--no-gpu", "--prefix", str(tmp_path / "env"))
    assert done.code == 4, done.err
    _no_raw_controls(done.err)
    assert len([ln for ln in done.err.splitlines() if ln.startswith("verl-setup")]) == 1


def test_a_cluster_file_reason_is_one_neutral_line(tmp_path: Path) -> None:
    gone = (MissingNode(name="deadbeef", ip="10.0.0.9", reason=f"gone{TITLE}{CLEAR}{FAKE}"),)
    path = cluster_file(tmp_path, [host(), host()], missing=gone)
    done = run_cli("plan", "--cluster", str(path))
    _no_raw_controls(done.out + done.err)
    assert "gone\\x1b]0;PWNED" in done.out + done.err
    data = run_cli("plan", "--cluster", str(path), "--json")
    assert json.loads(data.out)["data"]["cluster"]["missing"]["deadbeef"]["reason"].startswith("gone\x1b")


def test_progress_lines_stay_one_neutral_line() -> None:
    stream = io.StringIO()
    Progress(stream=stream).say(f"found {TITLE}{FAKE}")
    assert stream.getvalue().count("\n") == 1
    _no_raw_controls(stream.getvalue())

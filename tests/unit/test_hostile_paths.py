"""Round 4's crashes on hostile paths and files (shared/reference/reliability-review-2026-12-c.md):
each is exit 2 (or 4) with one line, never a traceback. T1 deep team config, P1 a 300-byte path
component, P2 a symlink loop, D2 a full disk under the install lock, M2 detect's cluster flags."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tests.conftest import run_cli
from verl_setup.environment.staging import Layout, install_lock
from verl_setup.errors import InstallError

LONG = "a" * 300


def _one_line_error(code: int, err: str, expected: int = 2) -> None:
    assert code == expected, err
    lines = [line for line in err.splitlines() if line.startswith("verl-setup")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert "unexpected error" not in err


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "text",
    ["x = " + "[" * 5000 + "]" * 5000 + "\n", "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n"],
    ids=["arrays", "inline-tables"],
)
@pytest.mark.parametrize("name", ["verl-setup.toml", "pyproject.toml"])
def test_t1_a_deeply_nested_team_config_in_a_parent_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, name: str
) -> None:
    prefix = "[tool.verl-setup]\nrow = 'cpu'\n[tool.other]\n" if name == "pyproject.toml" else ""
    (tmp_path / name).write_text(prefix + text)
    below = tmp_path / "a" / "b"
    below.mkdir(parents=True)
    monkeypatch.chdir(below)
    for argv in (("plan", "--no-gpu"), ("detect",)):
        done = run_cli(*argv)
        _one_line_error(done.code, done.err)
        assert "nests its arrays or tables too deep" in done.err


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "argv",
    [
        ("verify", "--prefix", f"/tmp/{LONG}/env", "--no-import"),
        ("diagnose", f"/tmp/{LONG}"),
        ("wheelhouse", "list", f"/tmp/{LONG}"),
        ("install", "--offline", f"/tmp/{LONG}", "--no-gpu", "--prefix", "/tmp/x-env"),
    ],
    ids=["verify", "diagnose", "wheelhouse-list", "install-offline"],
)
def test_p1_a_path_component_over_255_bytes_is_one_line(argv: tuple[str, ...]) -> None:
    done = run_cli(*argv)
    _one_line_error(done.code, done.err)
    assert "too long" in done.err


@pytest.mark.subprocess
def test_p1_report_notes_a_log_path_it_cannot_read_in_one_line_and_goes_on() -> None:
    """A bug report is still worth having when one log cannot be read: its section says why."""
    done = run_cli("report", "--log", f"/tmp/{LONG}", "--no-gpu")
    assert done.code == 0, done.err
    assert "Traceback" not in done.out + done.err
    (note,) = [line for line in done.out.splitlines() if "File name too long" in line]
    assert note.startswith("note: /tmp/")


@pytest.mark.subprocess
@pytest.mark.parametrize("how", ["flag", "variable", "validate", "render-out"])
def test_p2_a_symlink_loop_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    loop = tmp_path / "loop1"
    (tmp_path / "loop2").symlink_to(loop)
    loop.symlink_to(tmp_path / "loop2")
    argv: tuple[str, ...] = {
        "flag": ("plan", "--no-gpu", "--matrix", str(loop)),
        "variable": ("plan", "--no-gpu"),
        "validate": ("matrix", "validate", str(loop)),
        "render-out": ("render", "env", "--no-gpu", "--out", str(loop)),
    }[how]
    if how == "variable":
        monkeypatch.setenv("VERL_SETUP_MATRIX", str(loop))
    done = run_cli(*argv)
    _one_line_error(done.code, done.err)
    assert "edited by hand" not in done.err
    assert "symlink" in done.err.lower()


def test_d2_a_full_disk_while_taking_the_install_lock_is_exit_4(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*_args: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "pwrite", full)
    layout = Layout(prefix=tmp_path / "env")
    with (
        pytest.raises(InstallError, match="no space left on the filesystem of"),
        install_lock(layout, wait_s=0, say=lambda _s: None),
    ):
        pass


def test_m2_detect_cluster_flags_without_a_cluster_are_refused(tmp_path: Path) -> None:
    done = run_cli("detect", "--json", "--out", str(tmp_path / "x.json"))
    _one_line_error(done.code, done.err)
    assert "--out only go with --ray or --slurm" in done.err

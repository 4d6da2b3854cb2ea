"""Install mechanics without uv: interpreter choice, the staging lock, the atomic swap, recovery."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from verl_setup.environment import staging
from verl_setup.environment.python_choice import choose_python
from verl_setup.environment.staging import Layout, check_prefix, clean_leftovers, install_lock, swap
from verl_setup.errors import BadInputError, InstallError
from verl_setup.host.facts import PythonInterpreter


def interpreter(
    version: str, source: str = "pyenv versions", mismatch: str | None = None
) -> PythonInterpreter:
    return PythonInterpreter(
        path=f"/opt/py/{version}/bin/python3",
        version=version,
        implementation="cpython",
        version_flag=version,
        libpython=None,
        mismatch=mismatch,
        source=source,
    )


HOST = (interpreter("3.10.13"), interpreter("3.12.1"), interpreter("3.12.0", "PATH"), interpreter("3.11.7"))


def test_the_exact_patch_is_used_when_detected() -> None:
    choice = choose_python("3.11.7", HOST, downloads=True)
    assert choice.request == "/opt/py/3.11.7/bin/python3"
    assert choice.warning is None


def test_by_default_uv_gets_the_exact_version_with_the_same_minor_as_fallback() -> None:
    choice = choose_python("3.12.3", HOST, downloads=True)
    assert (choice.request, choice.version) == ("3.12.3", "3.12.3")
    assert "uv" in choice.source
    assert choice.fallback is not None
    assert choice.fallback.request == "/opt/py/3.12.1/bin/python3"  # the newest 3.12 found
    assert choice.fallback.warning is not None
    assert "Ray refuses" in choice.fallback.warning


def test_without_downloads_another_patch_of_the_same_minor_is_used_with_a_warning() -> None:
    choice = choose_python("3.12.3", HOST, downloads=False)
    assert choice.request == "/opt/py/3.12.1/bin/python3"
    assert choice.warning is not None
    assert "Python 3.12.3 not available (Python downloads are off)" in choice.warning


def test_a_minor_only_request_takes_the_newest_patch_silently() -> None:
    choice = choose_python("3.12", HOST, downloads=False)
    assert choice.version == "3.12.1"
    assert choice.warning is None


def test_an_interpreter_whose_libpython_disagrees_is_not_used() -> None:
    host = (interpreter("3.10.13", mismatch="`python3 --version` says 3.10.13 but ..."),)
    with pytest.raises(InstallError):
        choose_python("3.10.13", host, downloads=False)


def test_no_interpreter_and_no_downloads_names_both_ways_out_and_is_exit_4() -> None:
    with pytest.raises(InstallError) as caught:
        choose_python("3.9.18", HOST, downloads=False)
    message = str(caught.value)
    assert "no Python 3.9 found" in message
    assert "uv python install 3.9.18" in message
    assert "pyenv install 3.9.18" in message
    assert "--no-python-downloads or UV_PYTHON_DOWNLOADS" in message
    assert caught.value.exit_code == 4


def make_env(path: Path, marker: str) -> Path:
    """A directory that looks like a venv, tagged so a test can tell which one sits where."""
    path.mkdir(parents=True)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (path / "marker").write_text(marker)
    return path


def test_swap_into_an_empty_place(tmp_path: Path) -> None:
    layout = Layout(prefix=tmp_path / "env")
    new = make_env(layout.staging(1), "new")
    swap(new, layout, check=lambda _p: None)
    assert (layout.prefix / "marker").read_text() == "new"
    assert not new.exists()


def test_swap_replaces_the_old_env_and_removes_it(tmp_path: Path) -> None:
    layout = Layout(prefix=tmp_path / "env")
    make_env(layout.prefix, "old")
    new = make_env(layout.staging(1), "new")
    swap(new, layout, check=lambda _p: None)
    assert (layout.prefix / "marker").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env"]


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2-exchange", "two-renames"])
def test_a_failed_check_after_the_swap_restores_the_old_env(
    tmp_path: Path, exchange: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not exchange:  # a filesystem without RENAME_EXCHANGE takes the two-rename path
        monkeypatch.setattr(staging, "_exchange", lambda _a, _b: False)
    layout = Layout(prefix=tmp_path / "env")
    make_env(layout.prefix, "old")
    new = make_env(layout.staging(1), "new")

    def broken(prefix: Path) -> None:
        assert (prefix / "marker").read_text() == "new"
        raise InstallError("the new environment does not run here")

    with pytest.raises(InstallError):
        swap(new, layout, check=broken)
    assert (layout.prefix / "marker").read_text() == "old"
    assert not layout.backup(os.getpid()).exists()


def test_the_next_run_removes_staging_dirs_and_restores_a_parked_env(tmp_path: Path) -> None:
    layout = Layout(prefix=tmp_path / "env")
    make_env(layout.staging(4242), "half-built")
    make_env(layout.backup(4243), "old")  # killed between the two renames: nothing at the prefix
    said: list[str] = []
    clean_leftovers(layout, said.append)
    assert (layout.prefix / "marker").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env"]
    assert any("left by an interrupted install" in s for s in said)
    assert any("restoring env" in s for s in said)


def test_a_parked_env_is_dropped_when_the_prefix_holds_the_new_one(tmp_path: Path) -> None:
    layout = Layout(prefix=tmp_path / "env")
    make_env(layout.prefix, "new")
    make_env(layout.backup(4243), "old")
    clean_leftovers(layout, lambda _s: None)
    assert (layout.prefix / "marker").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env"]


def test_a_directory_that_is_not_a_venv_is_never_replaced(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("years of work")
    with pytest.raises(BadInputError, match="not a virtual environment"):
        check_prefix(home)
    check_prefix(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    check_prefix(tmp_path / "empty")


@pytest.mark.subprocess
def test_a_second_install_fails_at_once_naming_the_holder(tmp_path: Path) -> None:
    layout = Layout(prefix=tmp_path / "env")
    with install_lock(layout, wait_s=0, say=lambda _s: None):
        fd = os.open(layout.lock, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        probe = (
            "import sys; from pathlib import Path\n"
            "from verl_setup.environment.staging import Layout, install_lock\n"
            "from verl_setup.errors import InstallError\n"
            "try:\n"
            "    with install_lock(Layout(prefix=Path(sys.argv[1])), wait_s=0, say=print): pass\n"
            "except InstallError as e: print(e)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", probe, str(layout.prefix)], capture_output=True, text=True, check=True
        )
    assert f"another verl-setup install into {layout.prefix} is running (pid {os.getpid()})" in out.stdout


def test_a_second_install_waits_for_the_first(tmp_path: Path) -> None:
    layout = Layout(prefix=tmp_path / "env")
    said: list[str] = []
    holding = threading.Event()

    def first() -> None:
        with install_lock(layout, wait_s=0, say=said.append):
            holding.set()
            time.sleep(0.6)

    thread = threading.Thread(target=first)
    thread.start()
    holding.wait(5)
    start = time.monotonic()
    with install_lock(layout, wait_s=10, say=said.append):
        waited = time.monotonic() - start
    thread.join()
    assert waited > 0.3
    assert any(s.startswith("waiting for another install") for s in said)


@pytest.mark.subprocess
def test_stream_children_die_with_a_killed_parent(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    child_code = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    parent = (
        "import sys\n"
        "from verl_setup.util.runner import stream\n"
        f"stream([sys.executable, '-c', {child_code!r}], timeout=120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent])
    deadline = time.monotonic() + 20
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pidfile.read_text())
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        # A zombie still answers kill(0) until its new parent (init) reaps it.
        if Path(f"/proc/{child}/stat").read_text().split(") ")[1].startswith("Z"):
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the child of a SIGKILLed parent kept running")


TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-matrix"


@pytest.mark.subprocess
def test_the_tiny_matrix_validates_and_its_stand_in_wheels_rebuild_byte_for_byte(tmp_path: Path) -> None:
    from verl_setup.matrix.load import check  # noqa: PLC0415

    problems, matrix = check(TINY / "verl.yaml")
    assert problems == []
    assert matrix is not None
    rebuild = [sys.executable, str(TINY / "make_wheels.py"), str(tmp_path)]
    subprocess.run(rebuild, check=True, capture_output=True)
    committed = sorted(
        [f"wheels/{p.name}" for p in (TINY / "wheels").iterdir()]
        + [f"served/{p.name}" for p in (TINY / "served").iterdir()]
    )
    rebuilt = sorted(
        [f"wheels/{p.name}" for p in tmp_path.iterdir() if p.is_file()]
        + [f"served/{p.name}" for p in (tmp_path / "served").iterdir()]
    )
    assert committed == rebuilt
    for name in committed:
        here = tmp_path / name.removeprefix("wheels/")
        assert (TINY / name).read_bytes() == here.read_bytes(), name


# Run in a fresh interpreter: the deferral works in a process's main thread (where the CLI runs),
# and a pytest-xdist worker may run tests in another thread.
CTRL_C_DURING_POPEN = """
import os, signal, subprocess
from verl_setup.util import runner
started, real = [], subprocess.Popen
def popen_then_ctrl_c(*args, **kwargs):
    proc = real(*args, **kwargs)
    started.append(proc)
    os.kill(os.getpid(), signal.SIGINT)  # lands while Popen has not returned yet
    return proc
subprocess.Popen = popen_then_ctrl_c
try:
    runner.stream(["sleep", "30"], timeout=60)
except KeyboardInterrupt:
    print("interrupted", "killed" if started[0].poll() is not None else "still running")
"""


@pytest.mark.subprocess
def test_ctrl_c_while_a_tied_child_is_being_started_still_kills_that_child() -> None:
    # Without the deferred signal, Ctrl-C inside Popen left a started uv that nobody killed, still
    # writing into the staging dir while it was deleted (a leftover seen once in CI).
    out = subprocess.run(
        [sys.executable, "-c", CTRL_C_DURING_POPEN], check=False, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "interrupted killed", out.stdout + out.stderr


SIGNALS_AFTER_A_FAILED_START = """
import signal
from verl_setup.util import runner
before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
for argv in (["sleep", "1\\x00"], ["/nonexistent/uv"], ["/"]):  # ValueError, not found, OSError
    try:
        runner.stream(argv, timeout=5)
    except BaseException as exc:
        print(type(exc).__name__, end=" ")
print("same" if signal.pthread_sigmask(signal.SIG_BLOCK, []) == before else "blocked")
"""


@pytest.mark.subprocess
def test_a_child_that_fails_to_start_leaves_ctrl_c_deliverable() -> None:
    # Popen's ValueError (a NUL in an argument) left SIGINT and SIGTERM blocked in the main thread:
    # Ctrl-C was lost for the rest of the process and for every child it started.
    out = subprocess.run(
        [sys.executable, "-c", SIGNALS_AFTER_A_FAILED_START], check=False, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert out.stdout.strip() == "ValueError ProgramError ProgramError same", out.stdout + out.stderr


@pytest.mark.subprocess
def test_uv_killed_by_a_signal_is_named_as_such(tmp_path: Path) -> None:
    """uv's last words would name a staging dir already gone: say it was killed, by what."""
    from types import SimpleNamespace  # noqa: PLC0415

    from verl_setup.environment.install import _run_uv  # noqa: PLC0415
    from verl_setup.environment.install_job import Command  # noqa: PLC0415

    prefix = tmp_path / "env"
    job: Any = SimpleNamespace(uv_env=dict(os.environ), layout=Layout(prefix=prefix), uv="uv")
    dying = Command(
        what="torch", argv=["sh", "-c", "echo 'Using Python 3.12 at .env.staging-1' >&2; kill -9 $$"]
    )
    with pytest.raises(InstallError) as caught:
        _run_uv(dying, job=job, tty=False, timeout=30)
    assert str(caught.value) == (
        "uv (torch) was killed by SIGKILL (signal 9), not stopped by an error of its own (the kernel's "
        f"OOM killer, or another process?); {prefix} is untouched"
    )

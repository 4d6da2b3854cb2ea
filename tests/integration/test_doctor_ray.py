"""doctor's ray and python checks against real Ray heads on 127.0.0.1 (ray 2.60, test extra).

Two heads start in parallel once per test run, shared by the xdist workers through a lock file:
one with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 (it stays on 127.0.0.1, the healthy setup) and one
without (Ray silently moves it to the machine's address: the seed report's trap 3). Each head gets
its own short temp dir and ports 6400-6499 (dashboards 8400-8499); the last worker to finish
SIGKILLs exactly the processes the heads started, by PID.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import json_data, run_cli
from verl_setup.doctor.probes import ray_probe as rayprobe
from verl_setup.host.detect import detect
from verl_setup.util.uvbin import find_uv

pytestmark = [pytest.mark.slow, pytest.mark.serial]

RAY = Path(sys.executable).parent / "ray"
_STARTED: dict[int, subprocess.Popen[bytes]] = {}  # heads this process started, to reap them
START_DEADLINE = 90.0
TEST_LIMIT = 60  # seconds, per test (SIGALRM)
PYENV = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"


@dataclass
class Head:
    """A running `ray start --head --block` and the folder it owns."""

    port: int
    temp: Path
    group: int
    dashboard: int | None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "VERL_SETUP_"))}
    # A ~/.ray/auth_token left by any other Ray run turns token auth on for `ray start`.
    env["RAY_AUTH_MODE"] = "disabled"
    return env


def start_head(base: int, *, keep_loopback: bool, dashboard: int | None, gpus: int) -> Head:
    """Start a head in its own process group, on ports base..base+29 only."""
    temp = Path(tempfile.mkdtemp(prefix="rd", dir="/tmp"))  # Ray socket paths must stay < 108 chars
    env = _clean_env()
    if keep_loopback:
        env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ports = {
        "--port": base,
        "--ray-client-server-port": base + 1,
        "--dashboard-agent-listen-port": base + 2,
        "--dashboard-agent-grpc-port": base + 3,
        "--runtime-env-agent-port": base + 4,
        "--metrics-export-port": base + 5,
        "--node-manager-port": base + 6,
        "--object-manager-port": base + 7,
        "--min-worker-port": base + 10,
        "--max-worker-port": base + 29,
        "--dashboard-port": dashboard or 8400 + base % 100,
    }
    argv = [str(RAY), "start", "--head", "--block", "--node-ip-address", "127.0.0.1"]
    argv += [str(x) for pair in ports.items() for x in pair]
    argv += ["--temp-dir", str(temp / "ray"), "--num-cpus", "1", "--num-gpus", str(gpus)]
    argv += ["--disable-usage-stats", "--dashboard-host", "127.0.0.1"]
    argv += ["--include-dashboard", "true" if dashboard else "false"]
    log = (temp / "head.log").open("wb")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    _STARTED[proc.pid] = proc
    return Head(port=base, temp=temp, group=proc.pid, dashboard=dashboard)


def wait_ready(head: Head) -> None:
    """Until `ray start` has written the head's address and its GCS (and dashboard) accept."""
    deadline = time.monotonic() + START_DEADLINE
    record = head.temp / "ray" / "ray_current_cluster"
    while time.monotonic() < deadline:
        if _STARTED[head.group].poll() is not None:
            break
        if record.exists() and record.read_text().strip():
            host, _, port = record.read_text().strip().rpartition(":")
            if _accepts(host, int(port)) and (
                head.dashboard is None or _accepts("127.0.0.1", head.dashboard)
            ):
                return
        time.sleep(0.3)
    log = (head.temp / "head.log").read_text(errors="replace")[-3000:]
    stop_head(head)
    pytest.fail(f"Ray head on {head.port} did not start:\n{log}")


def _accepts(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


def stop_head(head: Head) -> None:
    """SIGKILL the head's process group and any worker the raylet started in its own group."""
    group = head.group
    pids = {p for p, (pgid, _) in _procs().items() if pgid == group}
    grew = True
    while grew:  # children of those (raylet workers call setsid)
        more = {p for p, (_, ppid) in _procs().items() if ppid in pids} - pids
        grew = bool(more)
        pids |= more
    pids |= _mentioning(str(head.temp))  # daemons that left the group still name the temp dir
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if group in _STARTED:  # reap it when this worker started it
        _STARTED.pop(group).wait(timeout=10)
    shutil.rmtree(head.temp, ignore_errors=True)


def _mentioning(text: str) -> set[int]:
    """PIDs whose command line contains `text`."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.add(int(entry.name))
    return found


def _procs() -> dict[int, tuple[int, int]]:
    """pid -> (pgid, ppid) from /proc/<pid>/stat."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        found[int(entry.name)] = (int(fields[2]), int(fields[1]))
    return found


@contextlib.contextmanager
def _locked(state: Path) -> Iterator[None]:
    while True:
        state.mkdir(exist_ok=True)
        try:
            lock = (state / "lock").open("w")
        except FileNotFoundError:  # removed between mkdir and open
            continue
        break
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def heads() -> Iterator[tuple[Head, Head]]:
    """(healthy, trap): started once per test run, in parallel, and shared by xdist workers."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID", f"solo{os.getpid()}")[:12]
    state = Path(tempfile.gettempdir()) / f"rdh-{run_id}"
    record, users = state / "heads.json", state / "users"
    while True:
        with _locked(state):
            if not (state / "lock").exists():  # the last user removed it while we waited
                continue
            if not record.exists():
                started = (
                    start_head(6400, keep_loopback=True, dashboard=8400, gpus=2),
                    start_head(6430, keep_loopback=False, dashboard=None, gpus=0),
                )
                try:
                    for head in started:
                        wait_ready(head)
                except BaseException:
                    for head in started:  # never leave a head running on a failed start
                        stop_head(head)
                    shutil.rmtree(state, ignore_errors=True)
                    raise
                record.write_text(json.dumps([{**vars(h), "temp": str(h.temp)} for h in started]))
            users.write_text(str(int(users.read_text() if users.exists() else "0") + 1))
            healthy, trap = (Head(**{**h, "temp": Path(h["temp"])}) for h in json.loads(record.read_text()))
            break
    try:
        yield healthy, trap
    finally:
        with _locked(state):
            left = int(users.read_text()) - 1
            users.write_text(str(left))
            if left == 0:
                stop_head(healthy)
                stop_head(trap)
                shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="module")
def host_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This machine's real facts, detected once for every doctor run of the module."""
    path = tmp_path_factory.mktemp("host") / "host.json"
    path.write_text(detect().to_json())
    return path


@contextlib.contextmanager
def hard_limit(seconds: int) -> Iterator[None]:
    """SIGALRM after `seconds`: a hang fails the test instead of stalling the suite."""

    def expired(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"test ran past its {seconds}s hard limit")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(autouse=True)
def _hard_limit() -> Iterator[None]:
    with hard_limit(TEST_LIMIT):
        yield


def doctor(
    monkeypatch: pytest.MonkeyPatch, host: Path, *args: str, loopback: bool
) -> tuple[int, dict[str, Any]]:
    """Run `verl-setup doctor --json` in-process with a clean Ray environment."""
    for name in [n for n in os.environ if n.startswith("RAY_")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # as the heads have it (_clean_env)
    if loopback:
        monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    result = run_cli("doctor", "--json", "--host", str(host), *args)
    assert result.err == "", result.err
    report = json_data(result.out)
    return result.code, {c["id"]: c for c in report["checks"]}


def test_healthy_loopback_head_passes_with_dashboard_and_enough_gpus(
    heads: tuple[Head, Head], host_json: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    healthy, _ = heads
    code, checks = doctor(
        monkeypatch, host_json, "--check", "ray", "--check", "python", "--prefix", sys.prefix,
        "--ray-address", healthy.address,
        "--", "python3", "-m", "verl.trainer.main_ppo", "trainer.n_gpus_per_node=2", "trainer.nnodes=1",
        loopback=True,
    )  # fmt: skip
    ray = checks["ray"]
    assert ray["status"] == "pass", ray
    evidence = {e["name"]: e["value"] for e in ray["evidence"]}
    assert evidence["dials"] == healthy.address
    assert evidence["alive nodes"] == "127.0.0.1 (head) 2 GPU"
    assert "answers" in evidence["dashboard"]
    assert evidence["GPUs"] == "2 in the cluster, 2 wanted"
    # The head was started from this very venv, so its workers run this env's interpreter.
    python = checks["python"]
    assert python["status"] == "pass", python
    workers = [e for e in python["evidence"] if e["name"] == "ray workers"]
    assert workers
    assert workers[0]["value"].startswith(sys.prefix)
    assert code == 0


def test_too_few_gpus_for_the_launch_is_verls_own_message(
    heads: tuple[Head, Head], host_json: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    healthy, _ = heads
    code, checks = doctor(
        monkeypatch, host_json, "--check", "ray", "--prefix", sys.prefix, "--ray-address", healthy.address,
        "--", "python3", "-m", "verl.trainer.main_ppo", "trainer.n_gpus_per_node=2", "trainer.nnodes=2",
        loopback=True,
    )  # fmt: skip
    assert checks["ray"]["status"] == "fail"
    assert "Total available GPUs 2 is less than total desired GPUs 4" in checks["ray"]["summary"]
    assert code == 5


def test_client_without_the_loopback_setting_would_hang_and_is_failed_fast(
    heads: tuple[Head, Head], host_json: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    healthy, _ = heads
    started = time.monotonic()
    code, checks = doctor(
        monkeypatch, host_json, "--check", "ray", "--prefix", sys.prefix, "--ray-address", healthy.address,
        loopback=False,
    )  # fmt: skip
    ray = checks["ray"]
    assert ray["status"] == "fail"
    dials = next(e["value"] for e in ray["evidence"] if e["name"] == "dials")
    # Ray's own rule rewrote 127.0.0.1 to the machine's address, where this head does not listen.
    assert not dials.startswith("127.0.0.1")
    assert f"rewrites {healthy.address} to {dials}" in ray["summary"]
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0" in ray["remedy"]
    assert time.monotonic() - started < 15
    assert code == 5


def test_head_started_without_the_setting_is_remapped_and_reported(
    heads: tuple[Head, Head], host_json: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, trap = heads
    code, checks = doctor(
        monkeypatch, host_json, "--check", "ray", "--prefix", sys.prefix, "--ray-address", trap.address,
        loopback=False,
    )  # fmt: skip
    ray = checks["ray"]
    nodes = next(e["value"] for e in ray["evidence"] if e["name"] == "alive nodes")
    registered = nodes.split()[0]
    assert registered != "127.0.0.1"  # what `ray start --node-ip-address 127.0.0.1` really did
    finding = next(f for f in ray["findings"] if "registered it as" in f["message"])
    # Reachable from here, so a warning; where the machine's address is firewalled it is the hang.
    assert finding["status"] == "warn"
    assert registered in finding["message"]
    assert ray["status"] == "warn"
    assert code == 0


def test_env_with_another_python_than_the_cluster_fails_both_checks(
    heads: tuple[Head, Head], host_json: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    healthy, _ = heads
    other = PYENV / "3.12.1" / "bin" / "python3"
    if not other.exists():
        pytest.skip(f"needs {other}")
    venv = tmp_path / "venv312"
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    subprocess.run(
        [find_uv(), "venv", "-q", "--python", str(other), str(venv)], check=True, env=env, timeout=60
    )
    code, checks = doctor(
        monkeypatch, host_json, "--check", "ray", "--check", "python", "--prefix", str(venv),
        "--ray-address", healthy.address, loopback=True,
    )  # fmt: skip
    assert "this env runs Python 3.12.1, the cluster 3.11" in checks["ray"]["summary"]
    assert checks["python"]["status"] == "fail"
    assert "Ray workers on 127.0.0.1 run" in checks["python"]["summary"]
    assert "will not see the packages installed here" in checks["python"]["summary"]
    assert code == 5


def test_stale_address_file_is_found_through_rays_temp_dir(
    host_json: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = Path(tempfile.mkdtemp(prefix="rd", dir="/tmp"))
    try:
        (temp / "ray").mkdir()
        (temp / "ray" / "ray_current_cluster").write_text("127.0.0.1:6479")  # nothing listens there
        monkeypatch.setenv("RAY_TMPDIR", str(temp))
        # doctor() drops RAY_* first; set it again after
        for name in [n for n in os.environ if n.startswith("RAY_") and n != "RAY_TMPDIR"]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        result = run_cli(
            "doctor", "--json", "--host", str(host_json), "--check", "ray", "--prefix", sys.prefix
        )
        ray = json_data(result.out)["checks"][0]
        assert ray["status"] == "fail"
        assert "ray_current_cluster" in ray["summary"]
        assert "stale" in ray["remedy"]
        # verl's bare ray.init() would join that record (the local ray.init hang, verl #4879)
        joins = next(f for f in ray["findings"] if f["message"].startswith("RAY_ADDRESS is not set but"))
        assert joins["status"] == "warn"
        assert "127.0.0.1:6479" in joins["message"]
        assert result.code == 5
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def test_a_gcs_that_accepts_but_never_answers_is_killed_within_the_limit(
    host_json: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rayprobe, "CHILD_TIMEOUT", 4.0)
    silent = socket.socket()
    silent.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    silent.bind(("127.0.0.1", 6480))
    silent.listen(16)  # accepts TCP handshakes, never speaks gRPC
    try:
        started = time.monotonic()
        code, checks = doctor(
            monkeypatch, host_json, "--check", "ray", "--prefix", sys.prefix,
            "--ray-address", "127.0.0.1:6480", loopback=True,
        )  # fmt: skip
        elapsed = time.monotonic() - started
    finally:
        silent.close()
    assert checks["ray"]["status"] == "fail"
    assert elapsed < 4.0 + 5.0
    assert code == 5

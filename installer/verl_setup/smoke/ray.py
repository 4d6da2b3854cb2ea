"""A Ray private to one smoke run: its own temp dir and ports, no dashboard, stopped by its pid.

`ray start --head --block` from the target env stays in the foreground: SIGTERM to it stops every
process it started (Ray's shutdown_at_exit), and its session (start_new_session) is killed after a
grace period, so nothing is left behind and no other Ray on the host is touched (never `ray stop`).
Every port is given, not left to Ray: with an agent's port at 0 the raylet waits a fixed 15 s for
the agent to write it to a file and aborts after that ("Timed out waiting for file
.../metrics_agent_port_..."), which a loaded 2-core host misses.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

READY = "Ray runtime started"
STOP_GRACE_S = 20.0
# Ray prestarts one Python worker per logical CPU (ray/_private/services.py,
# --num_prestart_python_workers); 16 of them importing Ray at once starve a small host.
QUIET = {
    # Ray versions that honour it let the raylet wait longer for its agents (Ray 2.58 waits 15 s)
    "RAY_agent_register_timeout_ms": "120000",
    "RAY_enable_worker_prestart": "0",
    "RAY_prestart_worker_first_driver": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # a private Ray stays on loopback
}
PORT_FLAGS = (
    "--port",
    "--node-manager-port",
    "--object-manager-port",
    "--dashboard-agent-grpc-port",
    "--dashboard-agent-listen-port",
    "--runtime-env-agent-port",
    "--metrics-export-port",
)


class RayStartError(RuntimeError):
    """The private Ray did not come up; the message says what its log said."""


@dataclass(frozen=True, kw_only=True)
class PrivateRay:
    """A running private Ray."""

    process: subprocess.Popen[bytes]
    temp_dir: Path
    port: int
    log: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def session(self) -> Path:
        """The session folder diagnose reads (logs of every Ray process and worker)."""
        return self.temp_dir / "session_latest"


def free_ports(n: int) -> list[int]:
    """n distinct TCP ports nothing listens on now (the OS picks them; all held until all are
    picked, so they differ)."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def start_argv(ray: Path, temp_dir: Path, ports: list[int], cpus: int, gpus: int) -> list[str]:
    """`ray start` for a private head on loopback with the given ports (PORT_FLAGS order)."""
    argv = [
        str(ray), "start", "--head", "--block",
        "--node-ip-address", "127.0.0.1",
        "--temp-dir", str(temp_dir),
        "--num-cpus", str(cpus),
        "--num-gpus", str(gpus),
        "--include-dashboard=false",
        "--disable-usage-stats",
    ]  # fmt: skip
    for flag, port in zip(PORT_FLAGS, ports, strict=True):
        argv += [flag, str(port)]
    return argv


# The raylet waits a fixed 15 s for each dashboard-agent port file (NodeManager::
# WaitForDashboardAgentPorts, Ray 2.58) and aborts when an agent imports slower than that: on a
# loaded host a wait, not a broken env. Later tries find the agent's modules in the page cache.
SLOW = ("Timed out waiting for file", "timed out during startup")
TRIES = 3


def start(
    ray: Path,
    temp_dir: Path,
    *,
    cpus: int,
    gpus: int,
    env: Mapping[str, str],
    timeout: float,
    say: Callable[[str], None] = lambda _: None,
) -> PrivateRay:
    """Start it (up to TRIES times when Ray's own startup waits run out); RayStartError otherwise."""
    for attempt in range(1, TRIES + 1):
        try:
            return _start(ray, temp_dir / f"try{attempt}", cpus=cpus, gpus=gpus, env=env, timeout=timeout)
        except RayStartError as exc:
            if attempt == TRIES or not any(
                s in str(exc) or s in _raylet_log(temp_dir / f"try{attempt}") for s in SLOW
            ):
                raise
            say(f"smoke: ray start: the raylet gave up on its agents (a loaded host): try {attempt + 1}")
    raise AssertionError("unreachable")  # pragma: no cover


def _raylet_log(temp_dir: Path) -> str:
    texts = []
    for name in ("raylet.out", "raylet.err"):
        with contextlib.suppress(OSError):
            texts.append(
                (temp_dir / "session_latest" / "logs" / name).read_text(encoding="utf-8", errors="replace")
            )
    return "\n".join(texts)


def _start(
    ray: Path, temp_dir: Path, *, cpus: int, gpus: int, env: Mapping[str, str], timeout: float
) -> PrivateRay:
    """Start it and wait until it says it runs; RayStartError (with it stopped) otherwise."""
    temp_dir.mkdir(parents=True, exist_ok=True)
    log = temp_dir.parent / f"ray-start.{temp_dir.name}.log"
    ports = free_ports(len(PORT_FLAGS))
    with log.open("wb") as sink:
        process = subprocess.Popen(  # the target env's own ray, by path
            start_argv(ray, temp_dir, ports, cpus, gpus),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**env, **QUIET},
            start_new_session=True,
        )
    running = PrivateRay(process=process, temp_dir=temp_dir, port=ports[0], log=log)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if READY in log.read_text(encoding="utf-8", errors="replace"):
                return running
            if process.poll() is not None:
                break
            time.sleep(0.5)
    except BaseException:  # Ctrl-C while it starts: it is ours to stop
        stop(running)
        raise
    why = f"exited {process.returncode}" if process.poll() is not None else f"not ready within {timeout:g}s"
    stop(running)
    tail = [ln for ln in log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    raise RayStartError(f"`ray start` {why}: {tail[-1] if tail else 'no output'}")


def stop(running: PrivateRay) -> None:
    """SIGTERM to the `ray start` process, then SIGKILL to its session after the grace period."""
    process = running.process
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_GRACE_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)

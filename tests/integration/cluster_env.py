"""A cached venv with Ray and a CPU-capable torch, and a real two-node Ray cluster on 127.0.0.1.

The venv (Python 3.12, ray 2.60.0, torch 2.11.0, pyarrow, numpy, safetensors, and verl 0.9.1 without
its dependencies: the doctor reads its config and code, never imports it) is built with uv once
into ~/.cache/verl-setup-tests and reused: from a warm uv cache it is hardlinked in seconds. The
cluster is a head and one worker node on this machine, each its own `ray start --block` on its
own ports, given --node-ip-address 127.0.0.1. Ray refuses a second node while
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 keeps it on loopback ("Multi-node Ray clusters are not
supported"), so without it Ray registers both nodes at the machine's own address, which is what a
real multi-node cluster looks like. The processes they started are SIGKILLed by PID
(tests.integration.test_doctor_ray.stop_head) when the module ends.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.test_doctor_ray import _STARTED, Head, _clean_env, stop_head
from verl_setup.util.uvbin import find_uv

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "verl-setup-tests"
PYENV = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
PINS = ("ray==2.60.0", "torch==2.11.0", "pyarrow", "numpy", "safetensors")


def torch_venv() -> Path:
    """The venv, built once (skip when the index cannot be reached and the cache is cold)."""
    return cached_venv("ray-2.60.0-torch-2.11.0-verl-0.9.1-py3.12", [*PINS], ["--no-deps", "verl==0.9.1"])


def cached_venv(name: str, *installs: list[str]) -> Path:
    """A pyenv Python 3.12 venv under CACHE with each `uv pip install` argument list, built once."""
    CACHE.mkdir(parents=True, exist_ok=True)
    venv = CACHE / name
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / ".complete").exists():
            return venv
        pythons = sorted(PYENV.glob("3.12.*/bin/python3"))
        if not pythons:
            pytest.skip("needs a CPython 3.12 under pyenv")
        env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
        uv = find_uv()
        steps = [[uv, "venv", "-q", "--clear", "--python", str(pythons[-1]), str(venv)]]
        steps += [
            [uv, "pip", "install", "-q", "--python", str(venv / "bin/python"), *args] for args in installs
        ]
        for argv in steps:
            if subprocess.run(argv, env=env, capture_output=True, timeout=600, check=False).returncode:
                pytest.skip(f"cannot install {' '.join(argv[6:])} here")
        (venv / ".complete").write_text("ok")
    return venv


@dataclass
class Cluster:
    """The head's address and the two `ray start` processes."""

    head: Head
    worker_group: int
    venv: Path

    @property
    def address(self) -> str:
        return self.head.address


def _ports(base: int) -> list[str]:
    ports = {
        "--node-manager-port": base + 6,
        "--object-manager-port": base + 7,
        "--dashboard-agent-listen-port": base + 2,
        "--dashboard-agent-grpc-port": base + 3,
        "--runtime-env-agent-port": base + 4,
        "--metrics-export-port": base + 5,
        "--min-worker-port": base + 10,
        "--max-worker-port": base + 29,
    }
    return [str(x) for pair in ports.items() for x in pair]


def start_cluster(
    venv: Path,
    base: int,
    *,
    node_env: Mapping[str, Mapping[str, str]] | None = None,
    wrap: Mapping[str, list[str]] | None = None,
    wait_s: float = 90,
) -> Cluster:
    """Head on base.., worker node on base+30..; returns once both nodes are alive.

    `node_env` adds variables to one node's `ray start` ("head" or "worker"): what its tasks
    see, as a differently configured machine would; `wrap` puts a command before it (unshare)."""
    ray = str(venv / "bin/ray")
    temp = Path(tempfile.mkdtemp(prefix="rc", dir="/tmp"))  # socket paths < 108 chars
    env = {k: v for k, v in _clean_env().items() if not k.startswith(("NCCL_", "GLOO_"))}
    common = ["--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--disable-usage-stats"]
    head_argv = [ray, "start", "--head", "--port", str(base)]
    head_argv += [*common, *_ports(base), "--temp-dir", str(temp / "ray"), "--include-dashboard", "false"]
    worker_argv = [ray, "start", "--address", f"127.0.0.1:{base}", *common, *_ports(base + 30)]
    procs = []
    for name, bare in (("head", head_argv), ("worker", worker_argv)):
        log = (temp / f"{name}.log").open("wb")
        argv = [*(wrap or {}).get(name, []), *bare]
        own = {**env, **(node_env or {}).get(name, {})}
        proc = subprocess.Popen(argv, env=own, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _STARTED[proc.pid] = proc
        procs.append(proc)
        if name == "head":
            try:
                _wait_nodes(venv, base, 1, env, temp, wait_s=wait_s)
            except BaseException:
                stop_head(Head(port=base, temp=temp, group=proc.pid, dashboard=None))
                raise
    head = Head(port=base, temp=temp, group=procs[0].pid, dashboard=None)
    cluster = Cluster(head=head, worker_group=procs[1].pid, venv=venv)
    try:
        _wait_nodes(venv, base, 2, env, temp, wait_s=wait_s)
    except BaseException:
        stop_cluster(cluster)
        raise
    return cluster


def stop_cluster(cluster: Cluster) -> None:
    worker = Head(port=0, temp=cluster.head.temp, group=cluster.worker_group, dashboard=None)
    stop_head(worker)
    stop_head(cluster.head)


def _wait_nodes(venv: Path, port: int, count: int, env: dict[str, str], temp: Path, *, wait_s: float) -> None:
    """Poll the GCS (one short-lived client per try) until `count` nodes are alive."""
    script = (
        "import sys\nfrom ray._raylet import GcsClient\n"
        f"nodes = GcsClient(address='127.0.0.1:{port}').get_all_node_info(timeout=3).values()\n"
        f"sys.exit(0 if sum(1 for n in nodes if n.state == 0) >= {count} else 1)\n"
    )
    started = time.monotonic()
    while time.monotonic() - started < wait_s:
        if any(p.poll() is not None for p in _STARTED.values() if str(venv) in str(p.args)):
            break
        try:
            argv = [str(venv / "bin/python"), "-c", script]
            if subprocess.run(argv, env=env, timeout=10, capture_output=True, check=False).returncode == 0:
                return
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.5)
    logs = "".join(p.read_text(errors="replace")[-1500:] for p in temp.glob("*.log"))
    pytest.fail(f"{count} Ray node(s) not alive after {time.monotonic() - started:.0f}s:\n{logs}")

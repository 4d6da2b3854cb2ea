"""`verl-setup verify` against real environments: the tiny matrix for each kind of drift, the
real `cpu` row once (install, verify, delete a package), and a real two-node Ray cluster on
127.0.0.1 with a planted mismatch on the second node.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import json_data
from tests.integration.test_install import cli, install, tiny_env
from verl_setup.util.uvbin import find_uv

pytestmark = [pytest.mark.network, pytest.mark.slow]


def uv_pip(*argv: str) -> None:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    subprocess.run([find_uv(), "pip", *argv], check=True, capture_output=True, env=env, timeout=600)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    prefix = tmp_path / "env"
    result = install(prefix, "--no-import")
    assert result.returncode == 0, result.stderr
    return prefix


def test_a_fresh_env_verifies_with_a_real_import(tiny: Path) -> None:
    result = cli("verify", "--prefix", str(tiny), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json_data(result.stdout)
    assert data["ok"] is True
    assert data["expected"]["source"].startswith("manifest ")
    assert data["import"]["ok"] is True
    modules = {m["module"]: m["outcome"] for m in data["import"]["modules"]}
    assert modules == {"verl": "ok", "verl.trainer.main_ppo": "ok"}
    # The same env, named by its interpreter or by $VIRTUAL_ENV.
    assert cli("verify", "--python", str(tiny / "bin" / "python"), "--no-import").returncode == 0
    assert cli("verify", "--no-import", env=tiny_env(VIRTUAL_ENV=str(tiny))).returncode == 0


def test_a_missing_torch_fails_the_diff_and_the_import(tiny: Path) -> None:
    uv_pip("uninstall", "--python", str(tiny / "bin" / "python"), "torch")
    result = cli("verify", "--prefix", str(tiny))
    assert result.returncode == 5
    assert "  missing    torch 0.0.2+tiny" in result.stdout
    assert "FAILED  verl: missing module torch (not installed)" in result.stdout
    assert "FAILED  verl.trainer.main_ppo: missing module torch" in result.stdout
    last = result.stderr.splitlines()[-1]
    assert last.startswith("verl-setup: error: ")
    assert "1 missing (torch)" in last


def test_two_packages_owning_one_module_are_harmful(tiny: Path) -> None:
    uv_pip("install", "--python", str(tiny / "bin" / "python"), "pynvml==11.5.3", "nvidia-ml-py==12.535.161")
    result = cli("verify", "--prefix", str(tiny), "--no-import")
    assert result.returncode == 5
    assert "harmful    nvidia-ml-py 12.535.161  (beside pynvml" in result.stdout


def test_a_shadowing_copy_on_pythonpath_is_a_changed_version_and_a_duplicate(
    tiny: Path, tmp_path: Path
) -> None:
    shadow = tmp_path / "shadow"
    uv_pip("install", "--target", str(shadow), "--python", str(tiny / "bin" / "python"), "six==1.16.0")
    result = cli("verify", "--prefix", str(tiny), "--no-import", env=tiny_env(PYTHONPATH=str(shadow)))
    assert result.returncode == 5
    assert "changed    six 1.17.0 -> 1.16.0" in result.stdout
    assert "duplicate  six 1.16.0  (2 copies: 1.16.0 in " in result.stdout


def test_an_env_without_manifest_needs_a_lock_or_a_row(tmp_path: Path) -> None:
    env = tmp_path / "plain"
    subprocess.run([find_uv(), "venv", "-q", "--python", sys.executable, str(env)], check=True)
    result = cli("verify", "--prefix", str(env), "--no-import")
    assert result.returncode == 2
    assert "give --lock FILE or --row ID" in result.stderr
    result = cli("verify", "--prefix", str(env), "--row", "cpu", "--no-import")
    assert result.returncode == 5
    assert "missing    verl 0.9.1" in result.stdout


def test_the_cpu_row_installs_by_default_verifies_and_names_a_deleted_package(tmp_path: Path) -> None:
    """The real thing: verl 0.9.1 + torch 2.11.0 from PyPI (~3 GB, from uv's cache when warm)."""
    prefix = tmp_path / "cpu" / ".venv"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_SETUP_")}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    try:
        result = cli("install", "--prefix", str(prefix), env=env, timeout=3600)  # no flags: no GPU here
        assert result.returncode == 0, result.stderr
        manifest = json.loads((prefix / "verl-setup.json").read_text())
        assert manifest["row"]["id"] == "cpu"
        assert manifest["distributions"]["verl"] == "0.9.1"
        assert manifest["distributions"]["torch"] == "2.11.0"
        verified = cli("verify", "--prefix", str(prefix), env=env, timeout=900)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "import probe" in verified.stdout
        assert "  ok      verl.trainer.main_ppo" in verified.stdout
        assert "  ok      verl.workers.engine_workers" in verified.stdout
        uv_pip("uninstall", "--python", str(prefix / "bin" / "python"), "tensordict")
        broken = cli("verify", "--prefix", str(prefix), "--no-import", env=env)
        assert broken.returncode == 5
        assert "  missing    tensordict 0.10.0" in broken.stdout
        assert "1 missing (tensordict)" in broken.stderr.splitlines()[-1]
    finally:
        shutil.rmtree(prefix.parent, ignore_errors=True)


# --- a real Ray cluster: head + one worker node on 127.0.0.1, ports 6500-6599 only ----------------

HEAD_PORTS = {
    "--port": 6500,
    "--node-manager-port": 6501,
    "--object-manager-port": 6502,
    "--ray-client-server-port": 6503,
    "--dashboard-agent-listen-port": 6504,
    "--dashboard-agent-grpc-port": 6505,
    "--metrics-export-port": 6506,
    "--runtime-env-agent-port": 6507,
    "--min-worker-port": 6510,
    "--max-worker-port": 6529,
}
WORKER_PORTS = {
    "--node-manager-port": 6531,
    "--object-manager-port": 6532,
    "--dashboard-agent-listen-port": 6534,
    "--dashboard-agent-grpc-port": 6535,
    "--metrics-export-port": 6536,
    "--runtime-env-agent-port": 6537,
    "--min-worker-port": 6540,
    "--max-worker-port": 6559,
}
ADDRESS = "127.0.0.1:6500"
# `ray start --address` refuses to join when RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, the setting that
# keeps Ray on 127.0.0.1 (machine-notes). This launcher lifts only that refusal and keeps the
# node's own address on loopback; the node and its workers are otherwise stock Ray.
JOIN_ON_LOOPBACK = (
    "import sys\n"
    "from ray._private import ray_constants, services\n"
    "from ray.scripts import scripts\n"
    "ray_constants.ENABLE_RAY_CLUSTER = True\n"
    "services.get_node_ip_address = lambda address=None: '127.0.0.1'\n"
    "sys.argv[0] = 'ray'\n"
    "sys.exit(scripts.main())\n"
)


def ray_env() -> dict[str, str]:
    # RAY_AUTH_MODE: a ~/.ray/auth_token left by any other Ray run turns token auth on otherwise.
    return {
        **os.environ,
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
    }


def flags(ports: dict[str, int]) -> list[str]:
    return [part for flag, port in ports.items() for part in (flag, str(port))]


class Cluster:
    """Ray processes this test started: each `ray start` leads its own process group."""

    def __init__(self) -> None:
        self.groups: list[int] = []
        self.dirs: list[str] = []

    def start(self, argv: list[str]) -> None:
        temp = tempfile.mkdtemp(prefix="rv", dir="/tmp")  # short: Ray's socket paths < 108 chars
        self.dirs.append(temp)
        proc = subprocess.Popen(
            [*argv, "--temp-dir", temp, "--num-cpus", "1", "--disable-usage-stats"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=ray_env(),
            start_new_session=True,
        )
        self.groups.append(proc.pid)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out[-3000:]

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for group in self.groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, sig)
            time.sleep(2 if sig == signal.SIGTERM else 0)
        for pid in self._strays():  # any process that left the groups but runs from our dirs
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)

    def _strays(self) -> list[int]:
        found = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                with contextlib.suppress(OSError):
                    cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
                    if any(d in cmdline for d in self.dirs):
                        found.append(int(proc.name))
        return found


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    try:
        yield c
    finally:
        c.stop()


def verify_ray(*more: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return cli(
        "verify", "--ray", ADDRESS, "--python", sys.executable, "--timeout", str(timeout),
        "--no-import", *more,
        env=ray_env(), timeout=timeout + 60,
    )  # fmt: skip


@pytest.mark.serial
def test_cluster_verify_reports_a_node_whose_packages_differ(cluster: Cluster) -> None:
    from importlib.metadata import version  # noqa: PLC0415

    head_idna = version("idna")
    planted = "3.7" if head_idna != "3.7" else "3.10"
    # Node B runs from its own venv (Ray's workers use the interpreter `ray start` ran with): it
    # sees this environment's packages through a .pth file, except its own, older idna.
    venv_b = Path(tempfile.mkdtemp(prefix="rvb", dir="/tmp"))
    cluster.dirs.append(str(venv_b))
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([find_uv(), "venv", "-q", "--python", str(base), str(venv_b)], check=True)
    (site_b,) = (venv_b / "lib").glob("python3.*/site-packages")
    (site_b / "zz_head_env.pth").write_text(site.getsitepackages()[0] + "\n")
    uv_pip("install", "--python", str(venv_b / "bin" / "python"), f"idna=={planted}")

    cluster.start([sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--node-ip-address",
                   "127.0.0.1", "--include-dashboard=false", *flags(HEAD_PORTS)])  # fmt: skip
    alone = verify_ray()
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert "1 alive nodes" in alone.stdout
    alone_json = verify_ray("--json")
    assert alone_json.returncode == 0, alone_json.stderr
    assert json_data(alone_json.stdout)["ok"] is True

    cluster.start([str(venv_b / "bin" / "python"), "-c", JOIN_ON_LOOPBACK, "start", "--address", ADDRESS,
                   "--node-ip-address", "127.0.0.1", *flags(WORKER_PORTS)])  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        result = verify_ray()
        if "2 alive nodes" in result.stdout or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert result.returncode == 5, result.stdout + result.stderr
    assert "2 alive nodes" in result.stdout
    assert str(venv_b) in result.stdout  # the worker node's environment is named
    assert f"changed    idna {head_idna} -> {planted}" in result.stdout
    assert "duplicate  idna" in result.stdout
    last = result.stderr.splitlines()[-1]
    assert last.startswith(f"verl-setup: error: Ray cluster at {ADDRESS}: 1 of 2 nodes differ: node ")
    assert "changed idna" in last
    # --json: the same verdict as the envelope, whose data validates against verify.json.
    as_json = verify_ray("--json")
    assert as_json.returncode == 5, as_json.stderr
    report = json_data(as_json.stdout)
    assert (report["ok"], len(report["nodes"])) == (False, 2)
    assert sum(1 for n in report["nodes"] if n["findings"]) == 1

"""detect --slurm inside a real Slurm job: slurmctld, slurmd and munged from Debian's slurm-wlm and
munge, started here as root with a private configuration (SLURM_CONF, munge socket and key in a
temp folder; ports 6790-6791), one node: this machine. Debian's slurmd is built without multiple
slurmd support, so one node is what the package allows.
"""

from __future__ import annotations

import contextlib
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
from pathlib import Path

import pytest

from tests.conftest import json_data, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.serial]

DAEMONS = ("munged", "slurmctld", "slurmd", "salloc", "sbatch", "srun", "scontrol")
VERL_SETUP = str(Path(sys.executable).parent / "verl-setup")  # the venv running the tests


def slurm_conf(folder: Path, node: str) -> str:
    return "\n".join(
        [
            "ClusterName=verlsetup",
            f"SlurmctldHost={node}(127.0.0.1)",
            "SlurmctldPort=6790",
            "SlurmdPort=6791",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={folder}/munge.socket",
            f"StateSaveLocation={folder}/ctld",
            f"SlurmdSpoolDir={folder}/d",
            f"SlurmctldPidFile={folder}/slurmctld.pid",
            f"SlurmdPidFile={folder}/slurmd.pid",
            f"SlurmctldLogFile={folder}/slurmctld.log",
            f"SlurmdLogFile={folder}/slurmd.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "SelectType=select/cons_tres",
            "MpiDefault=none",
            "ReturnToService=2",
            f"NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


@pytest.fixture(scope="module")
def slurm() -> Iterator[dict[str, str]]:
    """munged, slurmctld and slurmd running; the environment that points clients at them."""
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing or os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs as root with slurm-wlm and munge installed; missing: {missing}")
        pytest.skip("needs root and Debian's slurm-wlm and munge (apt-get install slurm-wlm munge)")
    folder = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
    for sub in ("ctld", "d"):
        (folder / sub).mkdir()
    folder.chmod(0o700)  # munged refuses a key in a folder others can write
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    node = socket.gethostname().split(".")[0]
    (folder / "slurm.conf").write_text(slurm_conf(folder, node))
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    started = []
    try:
        munge = ["munged", "--force", f"--key-file={key}", f"--socket={folder}/munge.socket"]
        munge += [f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log"]
        munge += [f"--seed-file={folder}/munged.seed"]
        for argv in (munge, ["slurmctld", "-i"], ["slurmd"]):  # each forks into the background
            subprocess.run(argv, env=env, check=True, timeout=60, capture_output=True)
            started.append(argv[0])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            argv = ["sinfo", "-h", "-o", "%t"]
            sinfo = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=30)
            if sinfo.stdout.strip() == "idle":
                break
            time.sleep(0.5)
        else:
            pytest.fail(
                f"the Slurm node is not idle after 60 s: {(folder / 'slurmctld.log').read_text()[-2000:]}"
            )
        yield env
    finally:
        for pid_file in ("slurmd.pid", "slurmctld.pid", "munged.pid"):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int((folder / pid_file).read_text().split()[0]), signal.SIGTERM)
        time.sleep(1)
        shutil.rmtree(folder, ignore_errors=True)


def test_detect_through_srun_inside_salloc_gives_the_cluster_file(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "cluster.json"
    argv = ["salloc", "-N1", "--ntasks-per-node=1", VERL_SETUP, "detect", "--slurm", "--out", str(out)]
    argv.append("--json")  # the envelope on stdout, its data the file written
    result = subprocess.run(argv, env=slurm, capture_output=True, text=True, timeout=120, check=False)
    print(result.stderr)
    assert result.returncode == 0, result.stderr
    assert "1 node(s) answered through slurm (srun), 0 missing" in result.stderr
    data = json.loads(out.read_text())
    assert json_data(result.stdout) == data
    assert (data["schema"], data["kind"]) == (1, "verl-setup-cluster")
    assert data["gathered"]["how"] == "slurm"
    assert data["gathered"]["tool"] == "srun"
    assert data["gathered"]["address"].startswith("job ")
    ((name, node),) = data["nodes"].items()
    assert name == socket.gethostname().split(".")[0]  # keyed by the Slurm node name
    assert node["head"] is True
    assert node["host"]["schema"] == 2  # HostFacts 2: accelerators beside the NVIDIA GPUs
    assert node["host"]["os"]["arch"] == os.uname().machine
    assert data["missing"] == {}
    plan = run_cli("plan", "--cluster", str(out), "--json")
    assert plan.code == 0, plan.err
    assert list(json_data(plan.out)["cluster"]["nodes"]) == [name]


def test_detect_inside_an_sbatch_job_gives_the_same_shape(slurm: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "cluster.json"
    script = tmp_path / "detect.sbatch"
    script.write_text(
        f"#!/bin/sh\n#SBATCH -N1\n#SBATCH --ntasks-per-node=1\n{VERL_SETUP} detect --slurm --out {out}\n"
    )
    argv = ["sbatch", "--wait", f"--output={tmp_path}/job.log", str(script)]
    result = subprocess.run(argv, env=slurm, capture_output=True, text=True, timeout=120, check=False)
    log = (tmp_path / "job.log").read_text()
    print(result.stdout, result.stderr, log)
    assert result.returncode == 0, log
    data = json.loads(out.read_text())
    assert data["gathered"]["how"] == "slurm"
    assert len(data["nodes"]) == 1
    assert "1 node(s) answered through slurm (srun), 0 missing" in log


def test_outside_an_allocation_is_one_line_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    result = run_cli("detect", "--slurm")
    assert result.code == 2
    assert "runs inside a Slurm allocation (salloc or sbatch)" in result.err

"""doctor ray with no cluster: a real throwaway Ray started under a CPU affinity mask (as Slurm sets
one), verl 0.9.1's CPUs per GPU bundle against it, a real tmpfs as Ray's temp dir, and proxies.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import json_data, run_cli
from tests.integration.cluster_env import torch_venv
from tests.integration.test_doctor_ray import _hard_limit  # noqa: F401  # autouse: 60 s per test

pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.network]
MAIN_PPO = ("--", "python3", "-m", "verl.trainer.main_ppo")


def doctor(monkeypatch: pytest.MonkeyPatch, *args: str, **env: str) -> tuple[int, dict[str, Any]]:
    for name in [n for n in os.environ if n.startswith("RAY_") or n.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # a ~/.ray/auth_token from any other run
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = run_cli("doctor", "--json", *args)
    assert result.err == "", result.err
    checks = {c["id"]: c for c in json_data(result.out)["checks"]}
    print(json.dumps(checks["ray"], indent=1))  # quoted per census row in the report
    return result.code, checks["ray"]


@contextlib.contextmanager
def affinity(cpus: set[int]) -> Iterator[None]:
    """Run (and let children inherit) under a CPU affinity mask, like `taskset -c 0`."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to limit to 1")
def test_a_real_ray_under_an_affinity_mask_counts_more_cpus_than_it_may_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    venv = torch_venv()
    with affinity({0}):
        code, ray = doctor(
            monkeypatch, "--check", "ray", "--prefix", str(venv), *MAIN_PPO, "trainer.n_gpus_per_node=1"
        )
    evidence = {e["name"]: e for e in ray["evidence"]}
    assert evidence["Ray counts"]["source"] == "Ray's get_num_cpus() in the target env"
    counted = int(evidence["Ray counts"]["value"].split()[0])
    assert counted == os.cpu_count()  # Ray ignores the mask
    warn = next(f for f in ray["findings"] if "affinity mask 1" in f["message"])
    assert warn["message"].startswith(f"Ray counts {counted} CPUs but this process may use 1")
    assert "ray_kwargs.ray_init.num_cpus=1" in warn["remedy"]
    assert evidence["throwaway Ray"]["value"].startswith("started in ")
    # verl 0.9.1 puts 3 CPUs in each GPU's bundle (ResourcePoolManager.max_colocate_count): with 2
    # CPUs a real placement group never becomes ready.
    assert evidence["CPUs per GPU bundle"]["value"] == "3 (x 1 GPUs = 3)"
    assert "never ready" in evidence["placement"]["value"]
    assert any("never became ready" in f["message"] for f in ray["findings"])
    assert code == 5


def test_launch_num_cpus_is_what_the_throwaway_ray_gets(monkeypatch: pytest.MonkeyPatch) -> None:
    venv = torch_venv()
    code, ray = doctor(
        monkeypatch, "--check", "ray", "--prefix", str(venv), *MAIN_PPO,
        "trainer.n_gpus_per_node=1", "ray_kwargs.ray_init.num_cpus=4",
    )  # fmt: skip
    evidence = {e["name"]: e for e in ray["evidence"]}
    assert evidence["Ray counts"]["source"] == "launch ray_kwargs.ray_init.num_cpus"
    assert "with 4 CPU, 1 GPU" in evidence["throwaway Ray"]["value"]
    assert evidence["placement"]["value"] == "1 x {'CPU': 3, 'GPU': 1}: ready, 1 actor(s) placed"
    # more CPUs than the machine has: the affinity warning names it
    assert any(f["message"].startswith("Ray counts 4 CPUs") for f in ray["findings"])
    # no GPU on this machine: verl's own message, before any worker starts
    assert "Total available GPUs 0 is less than total desired GPUs 1" in ray["summary"]
    assert code == 5


@pytest.fixture
def tmpfs() -> Iterator[Path]:
    """A real 8 MiB tmpfs (root can mount here; see machine-notes)."""
    where = Path(tempfile.mkdtemp(prefix="vst"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)], check=False)
    if mounted.returncode:
        where.rmdir()
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)
        where.rmdir()


def test_a_small_or_full_ray_temp_dir_on_a_real_tmpfs(monkeypatch: pytest.MonkeyPatch, tmpfs: Path) -> None:
    _, ray = doctor(monkeypatch, RAY_TMPDIR=str(tmpfs))  # every check: ray's static part only
    small = next(f for f in ray["findings"] if str(tmpfs) in f["message"])
    assert small["status"] == "warn"
    assert small["message"].startswith(f"{tmpfs} has 8 MiB free")
    (tmpfs / "filler").write_bytes(b"\0" * (8 * 2**20 - 64 * 1024))
    _, ray = doctor(monkeypatch, RAY_TMPDIR=str(tmpfs))  # every check: ray's static part only
    full = next(f for f in ray["findings"] if str(tmpfs) in f["message"] and "full" in f["message"])
    assert full["status"] == "fail"
    assert "Ray refuses new objects above 95%" in full["message"]


def test_a_proxy_without_no_proxy_for_the_local_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    _, ray = doctor(monkeypatch, https_proxy="http://10.9.9.9:3128")
    assert any(
        f["message"].startswith("https_proxy is set and no_proxy does not cover") for f in ray["findings"]
    )
    _, ray = doctor(monkeypatch, https_proxy="http://10.9.9.9:3128", no_proxy="localhost,127.0.0.1")
    assert not any("proxy" in f["message"] for f in ray["findings"])

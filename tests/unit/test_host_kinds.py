"""Jetson and WSL as host kinds (issue 14): recorded marker files, and what plan makes of them."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.conftest import FIXTURES, host, json_data, run_cli
from verl_setup.host.facts import HostFacts, HostKind, load_host_file
from verl_setup.host.kind import host_kind

HOSTS = FIXTURES / "hosts"


def tree(root: Path, files: dict[str, str]) -> Path:
    """A host tree with recorded marker files at their real paths."""
    for target, fixture in files.items():
        path = root / target
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(HOSTS / fixture, path)
    return root


def test_jetson_from_nv_tegra_release(tmp_path: Path) -> None:
    kind = host_kind(tree(tmp_path, {"etc/nv_tegra_release": "nv_tegra_release-r35.3.1.txt"}))
    assert (kind.kind, kind.release) == ("jetson", "35.3.1")


def test_jetson_from_the_device_tree_model(tmp_path: Path) -> None:
    kind = host_kind(tree(tmp_path, {"proc/device-tree/model": "device-tree-model-orin-nx.txt"}))
    assert kind.kind == "jetson"
    assert "Orin NX" in kind.evidence


def test_wsl_from_the_kernel_release(tmp_path: Path) -> None:
    kind = host_kind(tree(tmp_path, {"proc/sys/kernel/osrelease": "osrelease-wsl2-5.15.146.1.txt"}))
    assert kind.kind == "wsl"


def test_a_plain_linux_host(tmp_path: Path) -> None:
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text("6.1.0-28-amd64\n")
    assert host_kind(tmp_path).kind == "linux"


def with_kind(facts: HostFacts, kind: HostKind) -> HostFacts:
    return dataclasses.replace(facts, host_kind=kind)


def test_a_jetson_host_file_gets_an_honest_no(host_file: Callable[[HostFacts], Path]) -> None:
    jetson = HostKind(kind="jetson", evidence="/etc/nv_tegra_release exists", release="35.3.1")
    path = host_file(
        with_kind(host(driver="540.4.0", gpus=(("Orin (nvgpu)", "8.7"),), arch="aarch64"), jetson)
    )
    assert load_host_file(path).host_kind == jetson  # round-trips through detect --json
    result = run_cli("plan", "--host", str(path))
    assert result.code == 3
    assert "L4T 35.3.1" in result.err
    assert "not a discrete-GPU driver" in result.err
    assert len(result.err.splitlines()) == 1


def test_an_l4t_release_given_as_a_driver_is_not_zero_padded_into_one() -> None:
    result = run_cli("plan", "--driver", "35.3.1", "--sm", "8.7")
    assert result.code == 2
    assert "Jetson L4T release" in result.err
    assert "35.03.01" not in result.err


def test_wsl_compares_the_windows_driver_with_the_windows_floors(
    host_file: Callable[[HostFacts], Path],
) -> None:
    wsl = HostKind(kind="wsl", evidence="kernel '5.15.146.1-microsoft-standard-WSL2'")
    h100 = (("NVIDIA H100 80GB HBM3", "9.0"),)
    path = host_file(with_kind(host(driver="546.80", gpus=h100), wsl))
    result = run_cli("plan", "--json", "--host", str(path))
    assert result.code == 0, result.err
    facts = json_data(result.out)["facts"]
    assert facts["driver"]["value"] == "525.60.13"  # what a Windows 546.80 runs: CUDA 12.x, minor-compat
    assert "Windows driver 546.80" in facts["driver"]["source"]
    assert json_data(result.out)["row"]["torch"]["cuda"].startswith("12.")


def test_a_windows_driver_below_the_windows_cuda_12_floor_is_not_taken_for_a_linux_one(
    host_file: Callable[[HostFacts], Path],
) -> None:
    # 527.41 clears the Linux 12.x floor (525.60.13) but not the Windows one (528.33).
    wsl = HostKind(kind="wsl", evidence="kernel '5.15.146.1-microsoft-standard-WSL2'")
    h100 = (("NVIDIA H100 80GB HBM3", "9.0"),)
    linux = run_cli("plan", "--json", "--host", str(host_file(host(driver="527.41", gpus=h100))))
    assert linux.code == 0
    result = run_cli("plan", "--host", str(host_file(with_kind(host(driver="527.41", gpus=h100), wsl))))
    assert result.code == 3
    assert len(result.err.splitlines()) == 1

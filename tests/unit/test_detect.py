"""Detection end to end: a host tree with recorded driver files and an nvidia-smi that prints
recorded output (tests/fixtures/nvidia), a hung nvidia-smi, and the real GPU-less machine."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import NVIDIA, json_data, run_cli
from verl_setup.host import nvidia, system
from verl_setup.host.detect import detect
from verl_setup.host.facts import load_host_file


def fake_smi(bin_dir: Path, xml: str | None, csv: str | None, hang: bool = False) -> None:
    """An nvidia-smi that answers with recorded real outputs (or hangs, like a wedged driver)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    lines = ["#!/bin/sh"]
    if hang:
        lines.append("sleep 60")
    lines.append('case "$1" in')
    lines.append(f"  -q) {'cat ' + str(NVIDIA / xml) if xml else 'exit 9'} ;;")
    lines.append(f"  --query-gpu=*) {'cat ' + str(NVIDIA / csv) if csv else 'exit 9'} ;;")
    lines.append(f"  *) cat {NVIDIA / 'smi-banner-590.48.01-h100-load.txt'} ;;")
    lines.append("esac")
    script = bin_dir / "nvidia-smi"
    script.write_text("\n".join(lines) + "\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def host_tree(root: Path, proc_fixture: str | None) -> None:
    if proc_fixture:
        proc = root / "proc/driver/nvidia/version"
        proc.parent.mkdir(parents=True)
        proc.write_text((NVIDIA / proc_fixture).read_text())


def env_with(bin_dir: Path) -> dict[str, str]:
    return {"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "HOME": str(bin_dir.parent)}


@pytest.mark.subprocess
def test_driver_from_procfs_gpus_and_processes_from_smi_xml(tmp_path: Path) -> None:
    host_tree(tmp_path, "proc-driver-version-565.57.01-open.txt")
    fake_smi(tmp_path / "bin", xml="smi-q-x-590.44.01-2x-rtx-a5000.xml", csv=None)
    facts = detect(root=tmp_path, env=env_with(tmp_path / "bin"))
    assert facts.nvidia is not None
    # procfs outranks nvidia-smi for the driver; CUDA can only come from the user-mode side.
    assert facts.nvidia.version == "565.57.01"
    assert facts.nvidia.source.startswith("procfs")
    assert (facts.nvidia.cuda, facts.nvidia.cuda_source) == ("13.1", "nvidia-smi -q -x")
    assert len(facts.gpus) == 2
    assert all(g.processes for g in facts.gpus)
    assert any("NVML" in note for note in facts.notes)  # NVML is absent here, and said so


@pytest.mark.subprocess
def test_compute_capability_is_merged_from_the_csv_query(tmp_path: Path) -> None:
    fake_smi(tmp_path / "bin", xml=None, csv="smi-query-590.48.01-h100-all-fields.csv")
    facts = detect(root=tmp_path, env=env_with(tmp_path / "bin"))
    assert facts.nvidia is not None
    assert (facts.nvidia.version, facts.nvidia.source) == ("590.48.01", "nvidia-smi --query-gpu")
    (gpu,) = facts.gpus
    assert (gpu.name, gpu.compute_capability) == ("NVIDIA H100 80GB HBM3", "9.0")


@pytest.mark.subprocess
def test_banner_is_the_last_resort(tmp_path: Path) -> None:
    fake_smi(tmp_path / "bin", xml=None, csv=None)
    facts = detect(root=tmp_path, env=env_with(tmp_path / "bin"))
    assert facts.nvidia is not None
    assert (facts.nvidia.version, facts.nvidia.source) == ("590.48.01", "nvidia-smi banner")
    assert facts.gpus == ()


@pytest.mark.subprocess
def test_a_hung_nvidia_smi_costs_one_timeout_not_three(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 14: the XML, CSV and banner probes ran one after another, 3 x 5 s on a wedged driver.
    monkeypatch.setattr(nvidia, "SMI_TIMEOUT", 1.0)
    monkeypatch.setattr(system, "TOOL_TIMEOUT", 1.0)  # `nvidia-smi --version` hangs as well
    host_tree(tmp_path, "proc-driver-version-525.60.11-open.txt")
    fake_smi(tmp_path / "bin", xml="smi-q-x-515.105.01-tesla-t4.xml", csv=None, hang=True)
    start = time.monotonic()
    facts = detect(root=tmp_path, env=env_with(tmp_path / "bin"))
    elapsed = time.monotonic() - start
    assert elapsed < 2.5, elapsed  # one 1 s deadline and start-up; sequential probes took >= 3 s
    assert facts.nvidia is not None
    assert facts.nvidia.version == "525.60.11"  # procfs still answers
    assert facts.gpus == ()
    assert any("nvidia-smi gave no readable answer" in n for n in facts.notes)


@pytest.mark.subprocess
def test_python_whose_version_flag_disagrees_with_its_runtime(tmp_path: Path) -> None:
    # A launcher that reports one version while another interpreter runs (the seed's trap 1).
    real = Path(os.__file__).parents[2] / "bin" / "python3"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "python3.10"
    launcher.write_text(
        f'#!/bin/sh\n[ "$1" = --version ] && {{ echo "Python 3.10.12"; exit 0; }}\nexec {real} "$@"\n'
    )
    launcher.chmod(0o755)
    facts = detect(root=tmp_path, env={"PATH": str(bin_dir), "HOME": str(tmp_path)})
    (found,) = [p for p in facts.pythons if p.path == str(launcher)]
    assert found.version_flag == "3.10.12"
    assert found.mismatch is not None
    assert "says 3.10.12 but the running libpython is" in found.mismatch


@pytest.mark.subprocess
def test_pyenv_versions_are_found_without_shims(tmp_path: Path) -> None:
    pyenv = Path.home() / ".pyenv"
    versions = sorted(p.name for p in (pyenv / "versions").glob("3.*")) if pyenv.is_dir() else []
    if not versions:
        pytest.skip("no pyenv on this machine")
    facts = detect(root=tmp_path, env={"PATH": f"{pyenv}/shims", "HOME": str(Path.home())})
    found = {p.version for p in facts.pythons if p.source == "pyenv versions"}
    assert set(versions) <= found


@pytest.mark.subprocess
def test_real_detection_on_this_gpu_less_machine() -> None:
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver")
    facts = detect()
    assert facts.nvidia is None
    assert facts.gpus == ()
    assert facts.os.arch
    assert facts.os.glibc
    assert facts.pythons
    # nvcc without a GPU is a toolkit, never a GPU.
    if any(t.name == "nvcc" for t in facts.tools):
        assert facts.cuda_toolkits


@pytest.mark.subprocess
def test_detect_json_round_trips_into_plan_host(tmp_path: Path) -> None:
    result = run_cli("detect", "--json")
    assert result.code == 0
    path = tmp_path / "node.json"
    path.write_text(result.out)
    assert load_host_file(path).os.arch
    plan = run_cli("plan", "--host", str(path), "--json")
    assert plan.code == 0
    assert '"source": "host file' in plan.out


@pytest.mark.subprocess
def test_secrets_are_never_reported(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HF_TOKEN": "hf_secret",
        "UV_INDEX_URL": "https://user:s3cret@mirror.example/simple",
        "HF_HOME": "/data/hf",
        "VLLM_API_KEY": "vllm_secret",
        "NCCL_IB_KEYS": "nccl_secret",
        "SGLANG_APIKEY": "sglang_secret",
        "VERL_SETUP_TOKEN": "verl_secret",
        "NCCL_PASSWD_FILE": "passwd_secret",
        "TOKENIZERS_PARALLELISM": "true",  # a word of its own: verl's runtime env sets it
        "VLLM_KEYBOARD_LAYOUT": "us",  # KEY inside a word is no credential (made-up name)
    }
    facts = detect(root=tmp_path, env=env)
    dumped = facts.to_json()
    for secret in ("hf_secret", "s3cret", "vllm_secret", "nccl_secret", "sglang_secret", "verl_secret"):
        assert secret not in dumped
    assert "passwd_secret" not in dumped
    assert facts.env["HF_HOME"] == "/data/hf"
    assert facts.env["TOKENIZERS_PARALLELISM"] == "true"  # issue 23: TOKEN in its name kept it out
    assert facts.env["VLLM_KEYBOARD_LAYOUT"] == "us"


@pytest.mark.subprocess
def test_degraded_nvidia_smi_xml_is_used_when_it_parses(tmp_path: Path) -> None:
    # issue 14: nvidia-smi can exit non-zero (a GPU fallen off the bus) after printing the whole
    # document; rattler keeps such output, and so do we. The CSV query fails outright here.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    xml = NVIDIA / "smi-q-x-535.54.03-a100-sxm4-mig.xml"
    script.write_text(f'#!/bin/sh\ncase "$1" in\n  -q) cat {xml}; exit 15 ;;\n  *) exit 15 ;;\nesac\n')
    script.chmod(0o755)
    facts = detect(root=tmp_path, env=env_with(bin_dir))
    assert facts.nvidia is not None
    assert facts.nvidia.source == "nvidia-smi -q -x"
    assert [(g.name, g.pci_device_id) for g in facts.gpus] == [("NVIDIA A100-SXM4-80GB", "20b2")]


@pytest.mark.subprocess
def test_sysfs_pci_device_ids_name_the_chip_when_smi_gives_none(tmp_path: Path) -> None:
    # The CSV query has no PCI id; sysfs lists the NVIDIA display function (vendor 0x10de).
    for slot, (vendor, klass, device) in {
        "0000:17:00.0": ("0x10de", "0x030200", "0x2330"),
        "0000:00:1f.3": ("0x8086", "0x040300", "0x51c8"),  # an Intel audio device, ignored
    }.items():
        folder = tmp_path / "sys/bus/pci/devices" / slot
        folder.mkdir(parents=True)
        for name, value in (("vendor", vendor), ("class", klass), ("device", device)):
            (folder / name).write_text(value + "\n")
    fake_smi(tmp_path / "bin", xml=None, csv="smi-query-590.48.01-h100-all-fields.csv")
    facts = detect(root=tmp_path, env=env_with(tmp_path / "bin"))
    assert [g.pci_device_id for g in facts.gpus] == ["2330"]


def slow_ray(prefix: Path, version: str | None) -> Path:
    """A `ray` that takes 10 s to answer (Ray's CLI on a loaded host took 2.7 to 5.1 s) and
    leaves a mark when run, in a prefix laid out as a venv with ray's dist-info."""
    (prefix / "bin").mkdir(parents=True)
    mark = prefix / "ran"
    script = prefix / "bin/ray"
    script.write_text(f"#!/bin/sh\ntouch {mark}\nsleep 10\necho 'ray, version 9.9.9'\n")
    script.chmod(0o755)
    if version:
        (prefix / f"lib/python3.12/site-packages/ray-{version}.dist-info").mkdir(parents=True)
    return mark


@pytest.mark.subprocess
def test_rays_version_comes_from_its_metadata_and_a_slow_ray_never_runs(tmp_path: Path) -> None:
    mark = slow_ray(tmp_path / "venv", "2.58.0")
    start = time.monotonic()
    facts = detect(root=tmp_path, env=env_with(tmp_path / "venv/bin"))
    seconds = time.monotonic() - start
    (ray,) = [t for t in facts.tools if t.name == "ray"]
    assert (ray.version, ray.path) == ("2.58.0", str(tmp_path / "venv/bin/ray"))
    assert not mark.exists()
    assert seconds < system.TOOL_TIMEOUT  # `ray --version` alone would have taken 10 s


@pytest.mark.subprocess
def test_a_ray_without_metadata_is_reported_without_a_version(tmp_path: Path) -> None:
    mark = slow_ray(tmp_path / "venv", None)
    facts = detect(root=tmp_path, env=env_with(tmp_path / "venv/bin"))
    (ray,) = [t for t in facts.tools if t.name == "ray"]
    assert ray.version is None
    assert not mark.exists()


@pytest.mark.subprocess
def test_uv_managed_pythons_are_looked_for_where_uv_keeps_them(tmp_path: Path) -> None:
    # uv honours XDG_DATA_HOME (`uv python dir`); the fixed ~/.local/share/uv/python missed them.
    real = Path(os.__file__).parents[2] / "bin" / "python3"
    managed = tmp_path / "xdg/uv/python/cpython-3.12.3-linux-x86_64-gnu/bin"
    managed.mkdir(parents=True)
    (managed / "python3").symlink_to(real.resolve())
    env = {"PATH": "/nonexistent", "HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    facts = detect(root=tmp_path, env=env)
    assert [p.source for p in facts.pythons] == ["uv-managed"]


@pytest.mark.subprocess
def test_an_endless_nvidia_smi_is_cut_and_detect_stays_small(tmp_path: Path) -> None:
    """nvidia-smi that never stops printing: each probe reads at most its cap while reading, the
    child is stopped, detect answers with a note, and its peak memory stays under 100 MiB."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\nexec yes 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-0000000000)'\n"
    )
    smi.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    # A parent of its own: its RUSAGE_CHILDREN peak is detect's (nvidia-smi's `yes` is tiny).
    measure = (
        "import json, resource, subprocess, sys\n"
        "p = subprocess.run([sys.executable, '-m', 'verl_setup', 'detect', '--json'], capture_output=True)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
        "out, err = p.stdout.decode(), p.stderr.decode()\n"
        "print(json.dumps({'rc': p.returncode, 'out': out, 'err': err, 'peak': peak}))\n"
    )
    started = time.monotonic()
    result = json.loads(
        subprocess.run(
            [sys.executable, "-c", measure], env=env, capture_output=True, timeout=120, check=True
        ).stdout
    )
    assert result["rc"] == 0, result["err"]
    assert time.monotonic() - started < 60
    notes = json_data(result["out"])["notes"]
    assert any(n.endswith("nvidia-smi: output over 4 MiB, cut") for n in notes), notes
    print(f"detect peak RSS with an endless nvidia-smi: {result['peak'] / 2**20:.1f} MiB")
    assert result["peak"] < 100 * 2**20

"""The ABI check against real torch extensions: a tiny C++ extension compiled with
torch.utils.cpp_extension against PyPI's torch 2.6.0, installed beside torch 2.11.0, is named with
both torches (and really fails to import there, on the very symbol the check names); built
against torch 2.11.0 it passes and runs. `verify` fails such an environment with exit 5."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.torch_ext import (
    build_extension_wheel,
    fresh_env,
    install_wheel,
    run_extension,
    torch_env,
)
from verl_setup.environment.abi import check_environment, check_wheel
from verl_setup.util.wheelhouse import add_build_record

pytestmark = [pytest.mark.network, pytest.mark.slow]

# flash-attn's own label style: the torch minor, CUDA major and C++ ABI in the local version.
OLD_LABEL = "0.1.0+cu12torch2.6cxx11abiFALSE"


@pytest.fixture(scope="module")
def old_wheel() -> Path:
    return build_extension_wheel(torch_env("2.6.0"), version=OLD_LABEL)


@pytest.fixture(scope="module")
def new_wheel() -> Path:
    return build_extension_wheel(torch_env("2.11.0"))


def test_an_extension_built_against_torch_2_6_beside_torch_2_11_is_named_with_both_torches(
    old_wheel: Path, tmp_path: Path
) -> None:
    env = fresh_env("2.11.0", tmp_path / "env")
    install_wheel(env, old_wheel)
    report = check_environment(env / "bin" / "python")
    assert not report.ok
    (finding,) = report.findings
    assert finding.kind == "torch-symbols"
    assert finding.file.name.startswith("verl_abi_probe.cpython-312")
    assert "built against torch 2.6 (its version label +cu12torch2.6cxx11abifalse)" in finding.message
    assert "this environment has torch 2.11.0 (CUDA 13.0)" in finding.message
    assert "\n" not in finding.message
    # The check names what the dynamic linker then really refuses.
    imported = run_extension(env)
    assert imported.returncode != 0
    assert f"undefined symbol: {finding.missing[0]}" in imported.stderr


def test_a_build_record_in_the_wheel_names_the_exact_torch(old_wheel: Path, tmp_path: Path) -> None:
    wheel = tmp_path / old_wheel.name
    shutil.copy(old_wheel, wheel)
    add_build_record(wheel, {"torch": "2.6.0", "cuda": "12.4", "python": "cp312", "abi": False})
    env = fresh_env("2.11.0", tmp_path / "env")
    install_wheel(env, wheel)
    (finding,) = check_environment(env / "bin" / "python").findings
    assert finding.built_torch == "torch 2.6.0"
    assert finding.message.startswith(
        "verl_abi_probe.cpython-312-x86_64-linux-gnu.so (verl_abi_probe 0.1.0+cu12torch2.6cxx11abifalse) "
        "was built against torch 2.6.0, this environment has torch 2.11.0 (CUDA 13.0)"
    )


def test_an_extension_built_against_the_installed_torch_passes_and_runs(
    new_wheel: Path, tmp_path: Path
) -> None:
    env = fresh_env("2.11.0", tmp_path / "env")
    install_wheel(env, new_wheel)
    report = check_environment(env / "bin" / "python")
    assert report.ok, [f.message for f in report.findings]
    assert [p.name for p in report.checked] == ["verl_abi_probe.cpython-312-x86_64-linux-gnu.so"]
    assert report.torch is not None
    assert (report.torch.version, report.torch.cuda, report.torch.cxx11abi) == ("2.11.0", "13.0", True)
    ran = run_extension(env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[3.0, 3.0, 3.0]"


def _manifest(env: Path) -> None:
    """A verl-setup.json listing exactly what `env` holds, so verify has nothing but the ABI to fail."""
    site = next((env / "lib").glob("python3*/site-packages"))
    dists = {}
    for info in site.glob("*.dist-info"):
        meta = (info / "METADATA").read_text(errors="replace").splitlines()
        fields = dict(line.split(": ", 1) for line in meta[:3] if ": " in line)
        dists[fields["Name"]] = fields["Version"]
    record = {"row": {"id": "cpu"}, "python": {"version": "3.12.1"}, "distributions": dists}
    (env / "verl-setup.json").write_text(json.dumps(record))


def test_verify_fails_with_exit_5_on_the_abi_finding_and_passes_without_it(
    old_wheel: Path, new_wheel: Path, tmp_path: Path
) -> None:
    outcomes = {}
    for label, wheel in (("old", old_wheel), ("new", new_wheel)):
        env = fresh_env("2.11.0", tmp_path / label)
        install_wheel(env, wheel)
        _manifest(env)
        done = subprocess.run(
            [sys.executable, "-m", "verl_setup", "verify", "--prefix", str(env), "--no-import", "--json"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        outcomes[label] = (done.returncode, json.loads(done.stdout)["data"], done.stderr)
    code, report, stderr = outcomes["old"]
    assert code == 5, stderr
    assert report["findings"] == []  # every distribution matches: the ABI alone fails it
    (finding,) = report["abi"]["findings"]
    assert "torch 2.6" in finding["message"]
    assert "torch 2.11.0" in finding["message"]
    assert "ABI check: verl_abi_probe" in stderr
    code, report, stderr = outcomes["new"]
    assert code == 0, stderr
    assert report["abi"]["ok"] is True
    assert len(report["abi"]["checked"]) == 1


def test_a_wheel_is_checked_before_it_is_installed_and_the_environment_stays_as_it_was(
    old_wheel: Path, new_wheel: Path
) -> None:
    venv = torch_env("2.11.0")
    site = next((venv / "lib").glob("python3*/site-packages"))
    before = sorted(p.name for p in site.iterdir())
    (finding,) = check_wheel(old_wheel, site).findings
    assert finding.file == Path(old_wheel.name) / "verl_abi_probe.cpython-312-x86_64-linux-gnu.so"
    assert "built against torch 2.6" in finding.message
    assert "this environment has torch 2.11.0 (CUDA 13.0)" in finding.message
    report = check_wheel(new_wheel, site)
    assert report.ok
    assert [p.name for p in report.checked] == ["verl_abi_probe.cpython-312-x86_64-linux-gnu.so"]
    assert sorted(p.name for p in site.iterdir()) == before

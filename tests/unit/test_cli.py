"""The command line: exit codes, one-line errors, JSON contracts, precedence."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import host, json_data, run_cli
from verl_setup import __version__
from verl_setup.host.facts import HostFacts

WriteHost = Callable[[HostFacts], Path]


def test_plan_for_another_machine_from_flags_alone() -> None:
    result = run_cli("plan", "--driver", "535.129.03", "--gpu", "H100", "--python", "3.10.12", "--json")
    assert result.code == 0, result.err
    data = json_data(result.out)
    assert data["row"]["torch"]["cuda"].startswith("12.")
    assert data["python"] == "3.10.12"
    assert data["facts"]["driver"] == {"value": "535.129.03", "source": "flag --driver"}


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--driver", "banana"], "bad driver version 'banana'"),
        (["--gpu", "Voodoo5"], "unknown GPU 'Voodoo5'"),
        (["--python", "2.7"], "bad Python version '2.7'"),
        (["--sm", "nine"], "bad compute capability 'nine'"),
        (["--verl", "latest"], "bad verl version prefix 'latest'"),
    ],
)
@pytest.mark.subprocess
def test_bad_input_is_exit_2_and_one_line(argv: list[str], needle: str) -> None:
    result = run_cli("plan", *argv)
    assert result.code == 2
    assert needle in result.err
    assert result.err.count("\n") == 1
    assert result.out == ""


def test_host_file_problems_are_exit_2(tmp_path: Path, host_file: WriteHost) -> None:
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    assert "is not JSON" in run_cli("plan", "--host", str(garbage)).err
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"schema": 1, "os": {}}))
    result = run_cli("plan", "--host", str(wrong))
    assert result.code == 2
    assert "os: missing key 'distro'" in result.err
    bad_driver = host_file(host(driver="535.x", gpus=(("NVIDIA H100 80GB HBM3", "9.0"),)))
    result = run_cli("plan", "--host", str(bad_driver))
    assert result.code == 2
    assert "bad driver version '535.x'" in result.err
    assert run_cli("plan", "--host", str(tmp_path / "absent.json")).code == 2


def test_host_file_then_env_then_flag(host_file: WriteHost, monkeypatch: pytest.MonkeyPatch) -> None:
    path = host_file(host(driver="580.95.05", gpus=(("NVIDIA H200", "9.0"),) * 8))
    from_file = json_data(run_cli("plan", "--host", str(path), "--json").out)
    assert from_file["row"]["id"] == "verl0.9-vllm0.24.0"
    assert from_file["facts"]["gpu_count"]["value"] == 8
    assert from_file["facts"]["driver"]["source"].startswith(f"host file {path}")
    monkeypatch.setenv("VERL_SETUP_DRIVER", "550.54.15")
    from_env = json_data(run_cli("plan", "--host", str(path), "--json").out)
    assert from_env["facts"]["driver"]["source"] == "env VERL_SETUP_DRIVER"
    assert from_env["row"]["torch"]["cuda"].startswith("12.")
    from_flag = json_data(run_cli("plan", "--host", str(path), "--driver", "580.65.06", "--json").out)
    assert from_flag["facts"]["driver"]["source"] == "flag --driver"


def test_no_row_is_exit_3_with_what_would_fit() -> None:
    result = run_cli("plan", "--driver", "470.57.02", "--gpu", "A100")
    assert result.code == 3
    assert "driver >= 525.60.13 needed" in result.err
    assert "host has 470.57.02" in result.err


def test_explain_shows_facts_evidence_and_every_rejection() -> None:
    result = run_cli("plan", "--driver", "580.95.05", "--gpu", "H100", "--explain")
    assert result.code == 0
    assert "\nfacts      " in result.out
    assert "flag --driver: driver 580.95.05" in result.out
    assert "meta: vllm 0.24.0 pins torch==2.11.0" in result.out
    # Rows that fit but lost are counted (issue 32); --all-rows names each.
    assert (
        "verl0.4-vllm0.8.5"
        in run_cli("plan", "--driver", "580.95.05", "--gpu", "H100", "--explain", "--all-rows").out
    )


@pytest.mark.subprocess
def test_module_entry_point_and_help_work_in_a_subprocess() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "verl_setup", "--help"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0
    assert "detect" in out.stdout
    assert "plan" in out.stdout


def test_install_refuses_a_plan_that_needs_cuda_forward_compatibility_before_changing_anything(
    tmp_path: Path,
) -> None:
    prefix = tmp_path / "env"
    argv = ["--driver", "535.129.03", "--gpu", "H100", "--policy", "forward", "--without", "flash-attn"]
    result = run_cli("install", *argv, "--prefix", str(prefix), "--dry-run")
    assert result.code == 4
    assert "only through CUDA forward compatibility" in result.err
    assert "render docker --policy forward" in result.err
    assert not prefix.exists()
    rendered = run_cli("render", "docker", *argv, "--out", str(tmp_path / "image"))
    assert rendered.code == 0, rendered.err
    assert "cuda-compat-13-0" in (tmp_path / "image" / "Dockerfile").read_text()


def test_the_fast_top_level_help_is_argparses_at_every_width(monkeypatch: pytest.MonkeyPatch) -> None:
    from verl_setup.cli import build_parser, top_level_help  # noqa: PLC0415

    for columns in range(60, 241):
        monkeypatch.setenv("COLUMNS", str(columns))  # what argparse's formatter reads
        assert top_level_help(columns) == build_parser(()).format_help(), columns
    assert top_level_help(59) is None  # narrower: argparse wraps the usage line, and answers itself


@pytest.mark.parametrize("columns", ["40", "100"])
def test_help_and_version_answer_without_argparse_or_fall_back_to_it(
    columns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    result = run_cli("--help")
    assert result.code == 0
    assert result.out.startswith("usage: verl-setup")
    assert all(name in result.out for name in ("detect", "plan", "doctor"))
    for flag in ("--version", "-V"):
        version = run_cli(flag)
        assert version.code == 0
        assert version.out.startswith(f"verl-setup {__version__} (matrix "), version.out
        assert "; uv 0.13." in version.out  # the bundled uv, from its distribution's metadata


def test_version_names_the_matrix_digest_its_newest_proof_and_the_uv_and_answers_after_a_command() -> None:
    import hashlib  # noqa: PLC0415
    import re  # noqa: PLC0415

    from verl_setup.util.paths import data_dir  # noqa: PLC0415

    rows = data_dir("matrices") / "verl.yaml"
    proof = (data_dir("matrices") / "proof.yaml").read_text(encoding="utf-8")
    newest = max(re.findall(r"date: '(\d{4}-\d\d-\d\d)'", proof))
    digest = hashlib.sha256(rows.read_bytes()).hexdigest()[:12]
    bundled = importlib.metadata.version("uv")  # the uv our dependency installed (pyproject: 0.13.x)
    expected = f"verl-setup {__version__} (matrix {digest}, proven to {newest}; uv {bundled})\n"
    assert run_cli("-V").out == expected
    later = run_cli("-V", "plan")  # argparse's path: the same text, exit 0
    assert (later.code, later.out) == (0, expected)


@pytest.mark.subprocess
def test_top_level_help_imports_neither_argparse_nor_a_command() -> None:
    code = "import sys; from verl_setup.cli import main; main(['--help']); print(sorted(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = out.splitlines()[-1]
    assert "'argparse'" not in loaded
    assert "verl_setup.commands" not in loaded
    assert "verl_setup.util.about" not in loaded  # -V's matrix digest (hashlib, re, pathlib)


@pytest.mark.subprocess
def test_a_plan_from_flags_loads_only_what_its_flags_need() -> None:
    code = (
        "import io, sys, contextlib; from verl_setup.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['plan', '--driver', '580.95.05', '--gpu', 'H100', '--python', '3.12', '--json'])\n"
        "names = ('packaging.requirements', 'verl_setup.plan.verl_source', 'verl_setup.host.facts',\n"
        "         'verl_setup.util.secrets')\n"
        "print([n for n in names if n in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "[]"  # no --with, no host file, no --wheel-source

"""R1, R2, R3, R4: no fixture secret of the 20 formats (tests/secret_formats.py) appears in
`report`, `diagnose`, `detect`, `plan`, an error or --json."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, run_cli
from tests.secret_formats import FORMATS, MARKER
from verl_setup.util.secrets import mask

HOST = FIXTURES / "hosts" / "rtx-a5000x2-590.44.01.json"
TINY = FIXTURES / "tiny-matrix" / "verl.yaml"
FA_FLAGS = ("--matrix", str(TINY), "--row", "tiny-fa-wheel", "--driver", "570.124.06", "--gpu", "H100",
            "--engine", "vllm", "--python", "3.12.1")  # fmt: skip
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB "


@pytest.mark.parametrize(
    ("text", "secret"), [(t, s) for _i, t, s in FORMATS], ids=[i for i, _t, _s in FORMATS]
)
def test_r1_mask_hides_every_format(text: str, secret: str) -> None:
    assert secret not in mask(text)


@pytest.mark.parametrize(
    ("text", "secret"), [(t, s) for _i, t, s in FORMATS], ids=[i for i, _t, _s in FORMATS]
)
@pytest.mark.subprocess
def test_r1_report_and_diagnose_of_a_log_never_print_it(tmp_path: Path, text: str, secret: str) -> None:
    log = tmp_path / "run.log"
    log.write_text(f"step 1\n{OOM}{text}\n")
    report = run_cli("report", "--log", str(log), "--host", str(HOST))
    assert report.code == 0, report.err
    assert "CUDA out of memory" in report.out  # the line is there, as evidence
    assert secret not in report.out + report.err
    for argv in (("diagnose", str(log)), ("diagnose", "--json", str(log))):
        done = run_cli(*argv)
        assert secret not in done.out + done.err


@pytest.mark.subprocess
def test_r2_detect_and_its_json_mask_credentials_in_any_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"https://bob:{MARKER}31@hf.corp.example")
    monkeypatch.setenv("VERL_SETUP_WHEEL_SOURCES", f"https://bob:{MARKER}32@wheels.corp.example/simple/")
    monkeypatch.setenv("VERL_SETUP_PROVE_EXTRA_INDEXES", f"https://bob:{MARKER}33@idx.corp.example/simple/")
    monkeypatch.setenv("VLLM_IMAGE_FETCH_URL", f"https://bob:{MARKER}34@img.corp.example/")
    for i, text, _secret in FORMATS:
        monkeypatch.setenv(f"VERL_SETUP_FIXTURE_{i.upper().replace('-', '_')}", text)
    for argv in (("detect",), ("detect", "--json")):
        done = run_cli(*argv)
        assert done.code == 0, done.err
        assert "hf.corp.example" in done.out
        assert MARKER not in done.out + done.err
        assert "Xk7le" not in done.out  # nor a part of one


def test_r3_plan_lock_and_json_never_print_a_source_password(tmp_path: Path) -> None:
    source = f"https://alice:{MARKER}41@127.0.0.1:9/simple/"
    for argv in (
        ("plan", *FA_FLAGS, "--wheel-source", source),
        ("plan", *FA_FLAGS, "--wheel-source", source, "--json"),
        ("lock", *FA_FLAGS, "--wheel-source", source, "--out", str(tmp_path / "x.lock")),
        ("lock", *FA_FLAGS, "--wheel-source", source, "--out", str(tmp_path / "x.lock"), "--json"),
        ("plan", *FA_FLAGS, "--wheel-source", f"ftp://alice:{MARKER}42@h/"),
    ):
        done = run_cli(*argv)
        assert MARKER not in done.out + done.err, argv
    failed = run_cli("lock", *FA_FLAGS, "--wheel-source", source, "--out", str(tmp_path / "x.lock"))
    assert failed.code == 2
    assert "wheel source user https://***@127.0.0.1:9/simple/: unreachable" in failed.err


def test_r4_mask_home_covers_a_symlinked_home_and_names_with_spaces(tmp_path: Path) -> None:
    real = tmp_path / "real home"
    real.mkdir()
    link = tmp_path / "home-link"
    link.symlink_to(real)
    text = f"{real}/proj/run.log and {link}/x and /home/bob smith/proj/y"
    out = mask(text, env={"HOME": str(link)}, home=True)
    assert out == "~/proj/run.log and ~/x and ~/proj/y"
    assert os.fspath(real) not in out


def test_r3_a_lock_never_holds_a_source_password() -> None:
    from verl_setup.util.secrets import without_credentials  # noqa: PLC0415

    body = (
        f"flash-attn @ http://alice:{MARKER}51@127.0.0.1:8765/files/flash_attn-2.8.3-cp312-cp312-"
        "linux_x86_64.whl \\\n    --hash=sha256:" + "a" * 64 + "\n"
        f'url = "https://tok{MARKER}52@wheels.example/f.whl"\n'
    )
    out = without_credentials(body)
    assert MARKER not in out
    assert "http://127.0.0.1:8765/files/flash_attn-2.8.3" in out
    assert 'url = "https://wheels.example/f.whl"' in out

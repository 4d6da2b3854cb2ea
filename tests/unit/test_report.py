"""`verl-setup report`: one Markdown block, secrets masked, under GitHub's comment limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, host
from verl_setup.cli import main_inner
from verl_setup.commands.report import GITHUB_COMMENT_LIMIT, Section, markdown
from verl_setup.commands.text_output import host_text
from verl_setup.util.secrets import mask

RECORDED_HOST = FIXTURES / "hosts" / "rtx-a5000x2-590.44.01.json"


@pytest.mark.parametrize(
    ("text", "hidden", "kept"),
    [
        ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123", "hf_abcdefghijklmnop", "HF_TOKEN=***"),
        (
            "index https://alice:s3cr3t@pypi.corp.example/simple",
            "s3cr3t",
            "https://***@pypi.corp.example/simple",
        ),
        (
            "--extra-index-url https://__token__:pypi-AgEIcHlwaS5vcmc@x.example/s/",
            "pypi-AgEI",
            "https://***@x.example",
        ),
        (
            "export WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567",
            "0123456789abcdef",
            "WANDB_API_KEY=***",
        ),
        ("token ghp_0123456789abcdefghijklmnopqrstuvwxyz in a log", "ghp_0123", "token *** in a log"),
        ("AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI", "AWS_SECRET_ACCESS_KEY: ***"),
    ],
    ids=["hf-token", "index-url-password", "index-url-token", "wandb-key", "github-token", "aws-secret"],
)
def test_secrets_are_masked(text: str, hidden: str, kept: str) -> None:
    out = mask(text)
    assert hidden not in out
    assert kept in out


def test_home_paths_only_when_asked() -> None:
    text = "cache /home/alice/.cache/huggingface and /root/.cache/uv"
    assert mask(text) == text
    out = mask(text, env={"HOME": "/root"}, home=True)
    assert out == "cache ~/.cache/huggingface and ~/.cache/uv"


def test_a_large_cluster_still_fits_in_one_github_comment() -> None:
    # 512 nodes' worth of GPUs on one host reading, a doctor report over every node, and a
    # diagnosis that read 20,000 worker logs: each section is cut, the whole stays pasteable.
    gpus = (("NVIDIA H100 80GB HBM3", "9.0"),) * 4096
    facts = host(driver="570.124.06", gpus=gpus)
    doctor = "\n".join(
        f"WARN  ray         node 10.0.{i // 256}.{i % 256}: NCCL_SOCKET_IFNAME='eth0' here, "
        "absent in its workers"
        for i in range(512)
    )
    diagnosis = "\n".join(
        f"    read /tmp/ray/session_latest/logs/worker-{i:056x}-01000000-{i}.err" for i in range(20000)
    )
    out = markdown(
        [
            Section(title="Host", text=host_text(facts)),
            Section(title="Doctor", text=doctor),
            Section(title="Failed run", text="diagnose: unknown\n" + diagnosis),
        ]
    )
    assert len(out) < GITHUB_COMMENT_LIMIT
    assert out.startswith("<details>")
    assert out.rstrip().endswith("</details>")
    assert "more lines" in out
    assert out.count("```") % 2 == 0


def test_a_code_fence_inside_a_section_cannot_break_the_block() -> None:
    out = markdown([Section(title="Log", text="```\nmalicious\n```")])
    assert out.count("```") == 2


@pytest.mark.subprocess
def test_report_for_a_recorded_gpu_host(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = FIXTURES / "diagnose" / "nccl-timeout-verl-5750.log"
    host_file = tmp_path / RECORDED_HOST.name
    host_file.write_text(RECORDED_HOST.read_text())
    assert (
        main_inner(
            [
                "report",
                "--host",
                str(host_file),
                "--log",
                str(log),
                "--check",
                "cuda",
                "--check",
                "gpu-memory",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    for title in (
        "Host",
        "Selected row and its proof",
        "Environment (verl-setup verify)",
        "Doctor",
        "Failed run",
    ):
        assert f"### {title}" in out
    assert "590.44.01" in out
    assert "NVIDIA RTX A5000" in out
    assert "proof      imports" in out
    assert "diagnose: nccl-timeout" in out
    assert len(out) < GITHUB_COMMENT_LIMIT

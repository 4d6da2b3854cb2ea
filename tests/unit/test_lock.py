"""The lock file format: header, body checksum, pins and markers, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from verl_setup.environment.lock import parse, render
from verl_setup.environment.uv import uv_error
from verl_setup.errors import BadInputError, InstallError
from verl_setup.plan.steps import Choice

FIELDS = {
    "row": "cpu",
    "row-sha256": "ab" * 32,
    "matrix": "verl.yaml",
    "matrix-sha256": "cd" * 32,
    "python": "3.12.3",
    "platform": "x86_64-manylinux_2_28",
    "index-url": "default",
    "flash-attn": "none",
    "uv": "0.13.9",
}
BODY = """\
nvidia-cudnn-cu13==9.13.0.50 ; platform_machine == 'x86_64' \\
    --hash=sha256:1111111111111111111111111111111111111111111111111111111111111111
    # via torch
Six==1.17.0 \\
    --hash=sha256:2222222222222222222222222222222222222222222222222222222222222222
    # via -r requirements.in
verl[vllm]==0.9.1 \\
    --hash=sha256:3333333333333333333333333333333333333333333333333333333333333333
    # via -r requirements.in
"""


def test_a_rendered_lock_reads_back_with_its_fields_and_pins() -> None:
    lock = parse(render(FIELDS, BODY), Path("verl.lock"))
    assert lock.row_id == "cpu"
    assert lock.python == "3.12.3"
    assert lock.index_url is None
    assert [(p.name, p.version, p.marker) for p in lock.pins] == [
        ("nvidia-cudnn-cu13", "9.13.0.50", "platform_machine == 'x86_64'"),
        ("six", "1.17.0", None),
        ("verl", "0.9.1", None),
    ]


def test_rendering_is_deterministic_and_has_no_timestamp() -> None:
    text = render(FIELDS, BODY)
    assert text == render(dict(FIELDS), BODY)
    header = [line for line in text.splitlines() if line.startswith("#")][:10]
    assert not any("202" in line and ":" in line.split(": ", 1)[1] for line in header[1:])


def test_one_altered_hash_is_refused_with_exit_4() -> None:
    text = render(FIELDS, BODY).replace("2222222222222222", "2222222222222223", 1)
    with pytest.raises(InstallError, match="was changed after `verl-setup lock` wrote it") as caught:
        parse(text, Path("verl.lock"))
    assert caught.value.exit_code == 4


def test_a_requirements_file_is_not_a_lock() -> None:
    with pytest.raises(BadInputError, match="not a verl-setup lock"):
        parse(BODY, Path("requirements.txt"))


def test_a_header_missing_a_field_is_bad_input() -> None:
    text = render(FIELDS, BODY).replace("# uv: 0.13.9\n", "")
    with pytest.raises(BadInputError, match="lacks uv"):
        parse(text, Path("verl.lock"))


def test_uv_errors_become_one_line() -> None:
    stderr = (
        "Using Python 3.11.7 environment at: v2\n"
        "Resolved 4 packages in 62ms\n"
        "error: Failed to download `torch==0.0.1+tiny`\n"
        "  cause: Hash mismatch for `torch==0.0.1+tiny`\n\n"
        "         Expected:\n           sha256:5bfd\n"
    )
    assert uv_error(stderr) == "Failed to download `torch==0.0.1+tiny`: Hash mismatch for `torch==0.0.1+tiny`"


def test_a_megatron_lock_names_each_package_built_against_torch_and_install_asks_the_same() -> None:
    fields = {
        **FIELDS,
        "flash-attn": "build 2.8.3",
        "torch-extensions": "transformer-engine-torch=build 2.16.1, apex=without 0.1",
    }
    text = render(fields, BODY)
    assert "# torch-extensions: transformer-engine-torch=build 2.16.1, apex=without 0.1\n" in text
    lock = parse(text, Path("verl.lock"))
    assert lock.extension_modes() == {
        "flash-attn": "build",
        "transformer-engine-torch": "build",
        "apex": "without",
    }
    asked: dict[str, Choice] = {"flash-attn": "build", "transformer-engine-torch": "build"}
    assert lock.requests(asked) == {**asked, "apex": "without"}
    with pytest.raises(InstallError, match="--build transformer-engine-torch"):
        lock.requests({"flash-attn": "build"})


def test_a_lock_without_the_optional_header_reads_as_before() -> None:
    lock = parse(render(FIELDS, BODY), Path("verl.lock"))
    assert "torch-extensions" not in render(FIELDS, BODY)
    assert lock.extension_modes() == {"flash-attn": "none"}
    assert lock.requests({}) == {"flash-attn": "without"}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("# row: cpu\n", "# row: verl0.9-vllm0.24.0\n"),
        ("# index-url: default\n", "# index-url: http://127.0.0.1:1/simple\n"),
        ("# python: 3.12.3\n", "# python: 3.10.13\n"),
        ("# uv: 0.13.9\n", "# uv: 0.13.9\n# torch-extensions: apex=build 0.1\n"),
        ("# flash-attn: none\n", "# flash-attn: build 2.8.3\n"),
    ],
    ids=["row", "index-url", "python", "added-line", "flash-attn"],
)
def test_every_header_line_is_sealed(old: str, new: str) -> None:
    text = render(FIELDS, BODY)
    assert old in text
    with pytest.raises(InstallError, match="its header or body no longer matches sha256"):
        parse(text.replace(old, new, 1), Path("verl.lock"))


def test_a_format_2_lock_is_refused_as_unsealed() -> None:
    text = render(FIELDS, BODY).replace("format 4", "format 2", 1)
    with pytest.raises(BadInputError, match="format 2 lock, whose seal leaves its header open"):
        parse(text, Path("verl.lock"))

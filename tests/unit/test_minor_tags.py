"""The tags and names built from a version's "X.Y" (util.versions.minor_of) at each site that
used to cut it by hand: wheel-seen keys, index worlds, row ids, uv's tested range."""

from __future__ import annotations

import pytest

from verl_setup.errors import InstallError
from verl_setup.maintenance.candidate_row import _row_id
from verl_setup.maintenance.source_check import _tag_of, checkable, worlds_of
from verl_setup.matrix.load import load_matrix
from verl_setup.matrix.wheel_seen import wheel_key, world_of
from verl_setup.util.uvbin import TESTED_UV, check_version


def test_worlds_and_wheel_keys_carry_cuda_and_python_without_dots() -> None:
    assert world_of("12.8", "2.7") == "cu128/torch2.7"
    assert world_of("13.0.2", "2.11") == "cu130/torch2.11"
    assert world_of(None, "2.7") == "cu/torch2.7"  # a CPU row's world names no CUDA
    assert wheel_key("cu128/torch2.7", "flash-attn", "2.8.3", "3.12.3", "x86_64") == (
        "cu128/torch2.7 flash-attn 2.8.3 cp312 x86_64"
    )
    assert wheel_key("cu130/torch2.11", "apex", "0.1", "3.10", "aarch64").split()[3] == "cp310"


def test_the_wheelhouse_worlds_and_their_tags() -> None:
    (source,) = checkable(load_matrix().rows_file)
    worlds = dict(worlds_of(source))
    assert "cu130/torch2.11" in worlds
    assert "/cu130/torch2.11/" in worlds["cu130/torch2.11"]
    assert _tag_of(["12.8", "13.0"], "cu130/torch2.11") == "cu130/"
    assert _tag_of(["12.8"], "cu130/torch2.11") == "\0"


def test_a_proposed_rows_id_names_verls_minor() -> None:
    assert _row_id(load_matrix(), "0.9.1", "vllm", "0.11.0").startswith("verl0.9-vllm0.11.0")
    assert _row_id(load_matrix(), "0.10.0rc1", "sglang", "0.5.2").startswith("verl0.10-sglang0.5.2")


def test_uv_outside_the_tested_minor_is_refused() -> None:
    major, minor = TESTED_UV
    check_version("uv", f"{major}.{minor}.7")
    with pytest.raises(InstallError, match=f"needs uv {major}.{minor}.x"):
        check_version("uv", f"{major}.{minor - 1}.9")

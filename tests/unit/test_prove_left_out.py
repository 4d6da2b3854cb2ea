"""What `matrix prove` leaves out of a row: every package built against torch unless
VERL_SETUP_PROVE_WITH names it, and git sources unless VERL_SETUP_PROVE_GIT=1."""

from __future__ import annotations

from verl_setup.maintenance.prove import _left_out_flags
from verl_setup.matrix.load import load_matrix

MATRIX = load_matrix()
ROW = next(r for r in MATRIX.rows if r.id == "verl0.9-vllm0.24.0-megatron")


def _without(env: dict[str, str]) -> list[str]:
    flags = _left_out_flags(ROW, MATRIX, env)
    assert flags[::2] == ["--without"] * (len(flags) // 2)
    return flags[1::2]


def test_every_extension_and_the_git_source_are_left_out_by_default() -> None:
    assert _without({}) == ["flash-attn", "transformer-engine-torch", "apex", "mbridge"]


def test_prove_with_keeps_the_named_extensions_and_prove_git_the_git_source() -> None:
    env = {"VERL_SETUP_PROVE_WITH": " transformer-engine-torch,apex ", "VERL_SETUP_PROVE_GIT": "1"}
    assert _without(env) == ["flash-attn"]

"""Proof records: levels, staleness, merging, and selection preferring better-proven rows."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli
from verl_setup.errors import BadInputError
from verl_setup.matrix.load import load_matrix
from verl_setup.matrix.proof import ProofStep, load_proof, record
from verl_setup.util.paths import data_dir

EVIDENCE = ProofStep(date="2026-12-01", tool="verl-setup test", detail={"python": "3.12.1"})


def copy_matrix(tmp_path: Path) -> Path:
    for name in ("verl.yaml", "cuda.yaml"):
        shutil.copy(data_dir("matrices") / name, tmp_path / name)
    (tmp_path / "proof.yaml").unlink(missing_ok=True)
    return tmp_path / "verl.yaml"


def test_a_level_counts_only_with_every_level_below_it(tmp_path: Path) -> None:
    path = copy_matrix(tmp_path)
    matrix = load_matrix(path)
    row = matrix.row("cpu")
    book = record(load_proof(path), row, {"resolves": EVIDENCE, "imports": EVIDENCE}, None)
    assert book.for_row(row)[0] == "resolves"  # imports without installs is no proof of imports
    book = record(book, row, {"installs": EVIDENCE}, None)
    level, words = load_proof(path).for_row(row)
    assert level == "imports"
    assert "gpu: no run on a GPU host recorded" in words


def test_an_edited_row_is_unproven_again(tmp_path: Path) -> None:
    path = copy_matrix(tmp_path)
    row = load_matrix(path).row("cpu")
    record(load_proof(path), row, {"resolves": EVIDENCE}, None)
    edited = dataclasses.replace(row, packages={**row.packages, "numpy": "2.3.0"})
    level, words = load_proof(path).for_row(edited)
    assert level is None
    assert "stale" in words


def test_a_failure_drops_the_levels_recorded_before_it(tmp_path: Path) -> None:
    path = copy_matrix(tmp_path)
    row = load_matrix(path).row("cpu")
    record(load_proof(path), row, {"resolves": EVIDENCE, "installs": EVIDENCE, "imports": EVIDENCE}, None)
    record(load_proof(path), row, {"resolves": EVIDENCE}, "installs: uv failed")
    level, words = load_proof(path).for_row(row)
    assert level == "resolves"
    assert "last failure: installs: uv failed" in words


def test_gpu_host_steps_survive_a_cpu_side_re_proof(tmp_path: Path) -> None:
    # trains and gpu of a GPU row come only from a GPU host; a re-proof here keeps them
    path = copy_matrix(tmp_path)
    row = load_matrix(path).row("verl0.9-vllm0.24.0")
    steps = {"resolves": EVIDENCE, "installs": EVIDENCE, "imports": EVIDENCE}
    record(load_proof(path), row, {**steps, "trains": EVIDENCE, "gpu": EVIDENCE}, None)
    record(load_proof(path), row, steps, None)
    assert load_proof(path).for_row(row)[0] == "gpu"


def test_a_gpu_step_without_trains_stops_the_level_at_imports(tmp_path: Path) -> None:
    path = copy_matrix(tmp_path)
    row = load_matrix(path).row("verl0.9-vllm0.24.0")
    steps = {"resolves": EVIDENCE, "installs": EVIDENCE, "imports": EVIDENCE, "gpu": EVIDENCE}
    record(load_proof(path), row, steps, None)
    assert load_proof(path).for_row(row)[0] == "imports"


def test_a_broken_proof_file_is_one_line_exit_2(tmp_path: Path) -> None:
    path = copy_matrix(tmp_path)
    (tmp_path / "proof.yaml").write_text("rows: {cpu: {steps: {}}}\n")
    with pytest.raises(BadInputError, match="not a proof record"):
        load_proof(path)


def test_selection_prefers_the_better_proven_row_and_says_so(tmp_path: Path) -> None:
    path = copy_matrix(tmp_path)
    matrix = load_matrix(path)
    old = matrix.row("verl0.4-vllm0.8.5")
    record(load_proof(path), old, {"resolves": EVIDENCE, "installs": EVIDENCE, "imports": EVIDENCE}, None)
    args = ["plan", "--matrix", str(path), "--driver", "550.54.15", "--gpu", "A100", "--engine", "vllm"]
    result = run_cli(*args, "--python", "3.10")
    assert result.code == 0, result.err
    assert result.out.startswith("selected   verl0.4-vllm0.8.5")
    assert "proof      imports (proven 2026-12-01); gpu: no run on a GPU host recorded" in result.out
    listing = run_cli("matrix", "list", "--matrix", str(path))
    line = next(ln for ln in listing.out.splitlines() if ln.startswith("verl0.4-vllm0.8.5"))
    assert line.split()[1] == "imports"
    assert "no row has a run on a GPU host recorded" in listing.out
    data = yaml.safe_load((tmp_path / "proof.yaml").read_text())
    assert data["rows"]["verl0.4-vllm0.8.5"]["row_sha256"] == old.content_hash()


def test_a_row_proven_without_an_extension_never_reads_as_the_whole_stack(tmp_path: Path) -> None:
    path = copy_matrix(tmp_path)
    matrix = load_matrix(path)
    row = matrix.row("verl0.9-vllm0.24.0")
    reduced = ProofStep(
        date="2026-12-01",
        tool="verl-setup test",
        detail={"extensions": {"flash-attn": {"mode": "without", "source": None}}},
    )
    record(load_proof(path), row, {"resolves": EVIDENCE, "installs": reduced, "imports": EVIDENCE}, None)
    matrix = load_matrix(path)
    assert matrix.proof_words(row) == "imports (without flash-attn)"
    assert matrix.proof_json(row)["whole_stack"] is False
    listed = run_cli("matrix", "list", "--matrix", str(path))
    (line,) = [x for x in listed.out.splitlines() if x.startswith("verl0.9-vllm0.24.0 ")]
    assert "imports (without flash-attn)" in line
    whole = ProofStep(
        date="2026-12-01",
        tool="verl-setup test",
        detail={"extensions": {"flash-attn": {"mode": "wheel", "source": "verl-wheelhouse"}}},
    )
    record(load_proof(path), row, {"resolves": EVIDENCE, "installs": whole, "imports": EVIDENCE}, None)
    matrix = load_matrix(path)
    assert matrix.proof_words(row) == "imports"
    assert matrix.proof_json(row) == {
        "level": "imports",
        "detail": matrix.proof_of(row)[1],
        "whole_stack": True,
        "left_out": [],
    }

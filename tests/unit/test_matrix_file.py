"""Loading and validating matrix files: every problem named by file, line, row and key."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import run_cli
from verl_setup.matrix.load import check, default_matrix_path, load_matrix
from verl_setup.util.paths import data_dir

BUNDLED = default_matrix_path()


def copy_with(tmp_path: Path, old: str, new: str, count: int = 1) -> Path:
    text = BUNDLED.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "verl.yaml"
    path.write_text(text.replace(old, new, count), encoding="utf-8")
    return path


def test_bundled_matrix_is_valid_and_covers_the_required_stacks() -> None:
    problems, matrix = check(BUNDLED)
    assert problems == []
    assert matrix is not None
    stacks = {(r.verl.version[:3], r.engine.name, r.engine.version) for r in matrix.rows}
    for needed in [
        ("0.4", "vllm", "0.8.5"), ("0.4", "sglang", "0.4.6.post5"), ("0.5", "vllm", "0.8.5"),
        ("0.6", "vllm", "0.10.0"), ("0.6", "vllm", "0.11.0"), ("0.6", "sglang", "0.5.2"),
        ("0.6", "sglang", "0.5.5"), ("0.7", "vllm", "0.12.0"), ("0.7", "vllm", "0.17.0"),
        ("0.7", "sglang", "0.5.6"), ("0.7", "sglang", "0.5.9"), ("0.8", "vllm", "0.20.2"),
        ("0.8", "sglang", "0.5.12"), ("0.9", "vllm", "0.24.0"), ("0.9", "sglang", "0.5.12"),
        ("0.9", "none", None),
    ]:  # fmt: skip
        assert needed in stacks, needed


def test_every_pin_has_evidence_text() -> None:
    for row in load_matrix().rows:
        for key in ["verl", "engine", "torch", "python", *row.packages]:
            assert len(row.evidence[key]) > 10, (row.id, key)


def test_unknown_key_is_reported_with_line_and_suggestion(tmp_path: Path) -> None:
    path = copy_with(tmp_path, "    packages:\n", "    pacakges:\n")
    problems, matrix = check(path)
    assert matrix is None
    assert any(
        "rows[verl0.9-vllm0.24.0]: unknown key 'pacakges' (did you mean 'packages'?)" in p and f"{path}:" in p
        for p in problems
    ), problems


def test_unquoted_version_that_yaml_reads_as_a_float(tmp_path: Path) -> None:
    path = copy_with(tmp_path, 'supported: ["3.10", "3.11", "3.12"]', "supported: [3.10, 3.11, 3.12]")
    problems, _ = check(path)
    assert any("expected a string, got float 3.1 (quote it" in p for p in problems), problems


def test_missing_evidence_and_unknown_evidence_key(tmp_path: Path) -> None:
    path = copy_with(tmp_path, '      ray: "2.58.0"\n', '      ray: "2.58.0"\n      wandb: "0.21.0"\n')
    problems, _ = check(path)
    assert any("row 'verl0.9-vllm0.24.0': evidence: no evidence for 'wandb'" in p for p in problems), problems
    path = copy_with(
        tmp_path,
        '      numpy: "uv; verl 0.9 requires numpy>=2.0.0',
        '      numpyy: "uv; verl 0.9 requires numpy>=2.0.0',
    )
    problems, _ = check(path)
    assert any(
        "evidence for 'numpyy', which the row does not pin (did you mean 'numpy'?)" in p for p in problems
    )


def test_driver_requirement_below_the_cuda_table_is_refused(tmp_path: Path) -> None:
    path = copy_with(
        tmp_path,
        'driver: {compat: "580.65.06", strict: "580.65.06"}',
        'driver: {compat: "525.60.13", strict: "570.26"}',
    )
    problems, _ = check(path)
    assert any("below CUDA 13.0's family floor 580.65.06" in p for p in problems)
    assert any("below CUDA 13.0's full-support driver 580.65.06" in p for p in problems)


def test_duplicate_keys_and_malformed_yaml_are_one_clear_line(tmp_path: Path) -> None:
    path = copy_with(tmp_path, "    torch: {", "    deprecated: false\n    deprecated: false\n    torch: {")
    problems, _ = check(path)
    assert len(problems) == 1
    assert "duplicate key 'deprecated'" in problems[0]
    bad = tmp_path / "bad.yaml"
    bad.write_text("rows: [\n  - id: x\n", encoding="utf-8")
    result = run_cli("plan", "--no-gpu", "--matrix", str(bad))
    assert result.code == 2
    assert result.err.count("\n") == 1
    assert "malformed YAML" in result.err
    assert "Traceback" not in result.err


def test_validate_command_lists_every_problem_and_exits_2(tmp_path: Path) -> None:
    path = copy_with(tmp_path, "engine: {name: vllm,", "engine: {name: vlm,", count=2)
    result = run_cli("matrix", "validate", str(path))
    assert result.code == 2
    lines = result.out.splitlines()
    assert len(lines) == 2
    assert all("'vlm' is not one of vllm, sglang, none (did you mean 'vllm'?)" in line for line in lines)
    ok = run_cli("matrix", "validate")
    assert ok.code == 0
    assert "no problems" in ok.out


def test_a_users_matrix_uses_the_bundled_cuda_facts_unless_it_brings_its_own(
    tmp_path: Path,
) -> None:
    path = copy_with(tmp_path, "schema: 1", "schema: 1")
    assert load_matrix(path).cuda.facts == load_matrix().cuda.facts
    shutil.copy(data_dir("matrices") / "cuda.yaml", tmp_path / "cuda.yaml")
    (tmp_path / "cuda.yaml").write_text((tmp_path / "cuda.yaml").read_text().replace("T3}", "T9}", 1))
    problems, _ = check(path)
    assert any("unknown source 'T9'" in p for p in problems)


def test_matrix_show_and_list() -> None:
    shown = run_cli("matrix", "show", "verl0.4-vllm0.8.5")
    assert shown.code == 0
    assert "vllm==0.8.5" in shown.out
    assert "install_vllm_sglang_mcore.sh" in shown.out
    missing = run_cli("matrix", "show", "verl0.4-vllm0.8.6")
    assert missing.code == 2
    assert "did you mean 'verl0.4-vllm0.8.5'" in missing.err
    listed = run_cli("matrix", "list", "--json")
    assert listed.code == 0
    assert '"id": "cpu"' in listed.out


def test_missing_matrix_file(tmp_path: Path) -> None:
    result = run_cli("plan", "--no-gpu", "--matrix", str(tmp_path / "nope.yaml"))
    assert result.code == 2
    assert "no such matrix file" in result.err


def test_a_bad_driver_string_in_a_row_is_listed_with_the_other_problems(tmp_path: Path) -> None:
    path = copy_with(
        tmp_path,
        'driver: {compat: "580.65.06", strict: "580.65.06"}',
        'driver: {compat: "r580", strict: "580.65.06"}',
    )
    path.write_text(
        path.read_text()
        .replace("    pacakges", "    packages")
        .replace('      ray: "2.58.0"\n', '      ray: "2.58.0"\n      wandb: "0.21.0"\n', 1)
    )
    problems, matrix = check(path)
    assert matrix is None
    assert any("requires.driver: bad driver version 'r580'" in p for p in problems), problems
    assert any("no evidence for 'wandb'" in p for p in problems), problems  # not the only one listed


def test_every_new_row_kind_states_its_evidence() -> None:
    matrix = load_matrix()
    megatron = [r for r in matrix.rows if r.backend == "megatron"]
    arm = [r for r in matrix.rows if r.requires.arch == ("aarch64",)]
    assert megatron
    assert arm
    assert all("requires.arch" in r.evidence for r in arm)
    assert all({"transformer-engine", "megatron-core"} <= set(r.evidence) for r in megatron)
    assert {v for u in matrix.rows_file.unfit for v in u.versions} >= {"0.32.0", "0.33.0", "0.5.15"}

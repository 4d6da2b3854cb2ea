"""issue 32, item 4: `plan --explain` for an H100 on driver 580 fits one screen with nothing lost:
rows that fit but lost are grouped by why, known issues are one line each with an id, and every
hidden part is one flag away, named on the screen."""

from __future__ import annotations

from tests.conftest import run_cli
from verl_setup.matrix.load import load_matrix

H100 = ("--gpu", "H100", "--driver", "580.95.05")


def test_explain_for_h100_on_580_fits_in_40_lines_and_names_the_flags_for_the_rest() -> None:
    result = run_cli("plan", "--explain", *H100)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert len(lines) <= 40, len(lines)
    assert not any("fits, but" in line for line in lines)  # no row that fits is called rejected
    grouped = next(line for line in lines if line.startswith("also fit   "))
    assert grouped.startswith("also fit   20 rows, not preferred: a newer verl (")
    assert "`plan --explain --all-rows`" in lines[-1]
    assert "`plan --known-issues`" in lines[-1]
    issues = [line for line in lines if line.startswith("warning    known issue ")]
    assert [line.split(":")[0] for line in issues] == [f"warning    known issue ki{i}" for i in (1, 2, 3)]
    assert all(len(line) <= 200 for line in issues)
    # Every pin's evidence is still there (equal texts share a line).
    row = load_matrix(None).row("verl0.9-vllm0.24.0")
    for key in row.evidence:
        assert any(key in line for line in lines), key


def test_all_rows_lists_every_other_row_with_its_reasons() -> None:
    result = run_cli("plan", "--explain", "--all-rows", *H100)
    assert result.code == 0, result.err
    row_ids = [r.id for r in load_matrix(None).rows if r.id != "verl0.9-vllm0.24.0"]
    for row_id in row_ids:
        assert f"\n  {row_id}\n" in result.out, row_id


def test_known_issues_prints_each_in_full_with_its_source() -> None:
    result = run_cli("plan", "--known-issues", *H100)
    assert result.code == 0, result.err
    row = load_matrix(None).row("verl0.9-vllm0.24.0")
    for i, issue in enumerate(row.known_issues):
        assert f"ki{i + 1}: {issue.summary}" in result.out
        assert f"    source: {issue.source}" in result.out


def test_quiet_plan_prints_each_known_issue_in_one_short_line() -> None:
    result = run_cli("plan", "-q", *H100)
    known = [line for line in result.out.splitlines() if "known issue" in line]
    assert len(known) == 3
    assert all(len(line) < 200 for line in known)

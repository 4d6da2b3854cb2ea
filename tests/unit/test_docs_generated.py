"""The docs pages written from the code (tasks/gen_docs.py) are what the code gives now: the CLI
reference, environment variables, exit codes, schemas, team config keys, the matrix page, and the
selector's grid of `plan` answers."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.docs_task import committed_grid, gen_docs

ROOT = Path(__file__).parents[2]


@pytest.fixture(autouse=True)
def _width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")  # gen_docs fixes it; undone after the test


def test_every_generated_page_is_what_the_code_gives_now() -> None:
    stale = [
        str(path.relative_to(ROOT))
        for path, text in gen_docs().pages().items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]
    assert not stale, f"stale docs pages {stale}: run `python tasks/gen_docs.py` and commit them"


def test_every_command_and_flag_of_the_parser_is_on_the_cli_page() -> None:
    task = gen_docs()
    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    for name, parser in task.commands():
        assert f"\n## {name}\n" in page
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}`" in page, flag


def test_every_variable_the_source_reads_is_documented_and_listed_on_its_commands() -> None:
    task = gen_docs()
    missing = task.source_variables() - task.documented_variables()
    assert not missing, f"add {sorted(missing)} to OTHER_VARIABLES in tasks/gen_docs.py"
    cli = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    plan_section = cli.split("\n## plan\n", 1)[1].split("\n## ", 1)[0]
    for name in ("VERL_SETUP_DRIVER", "VERL_SETUP_SM", "VERL_SETUP_WHEEL_SOURCES", "VERL_SETUP_DEBUG"):
        assert f"`{name}`" in plan_section.rsplit("Environment: ", 1)[1]
    completion = cli.split("\n## completion\n", 1)[1].split("\n## ", 1)[0]
    assert "VERL_SETUP_DRIVER" not in completion  # only what the command reads


def test_the_exit_codes_page_names_every_error_class_with_its_code() -> None:
    from verl_setup import errors  # noqa: PLC0415

    page = (ROOT / "docs" / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    for cls in (
        errors.BadInputError,
        errors.NoCompatibleRowError,
        errors.InstallError,
        errors.CheckFailedError,
    ):
        assert f"| {cls.exit_code} | `{cls.__name__}` |" in page


def test_the_grid_was_computed_from_this_matrix_and_this_selection_code_for_every_input() -> None:
    task = gen_docs()
    grid = committed_grid()
    sha, rows = task.matrix_rows()
    assert grid["matrix_sha256"] == sha, "the matrix changed: run `python tasks/gen_docs.py`"
    assert grid["code_sha256"] == task.code_digest(), (
        "plan/ or matrix/ changed: run `python tasks/gen_docs.py`"
    )
    assert set(grid["keys"]) == {task.grid_key(i) for i in task.grid_inputs()}
    assert len(grid["keys"]) >= 50
    chosen = {a["row"] for a in grid["answers"]}
    assert chosen - {None} <= {r["id"] for r in rows}
    assert len(chosen) >= 5  # the grid reaches rows of several verl lines, and "no row"


def test_a_sample_of_the_grid_equals_plan_now() -> None:
    task = gen_docs()
    grid = committed_grid()
    inputs = list(task.grid_inputs())
    for one in random.Random(33).sample(inputs, 60):  # noqa: S311  # a fixed draw
        stored = grid["answers"][grid["keys"][task.grid_key(one)]]
        assert stored == task.plan_answer(one), one

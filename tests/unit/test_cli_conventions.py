"""The conventions of uv and pip: no abbreviations, -v and -q everywhere, exit codes and variables
in --help, a terminal's status line ended before the prompt."""

from __future__ import annotations

import io

import pytest

from tests.conftest import run_cli
from verl_setup.cli import json_command, parse
from verl_setup.output import Progress, end_status_lines


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_an_abbreviated_flag_is_refused_not_guessed() -> None:
    # pip's and uv's --pre means pre-releases; argparse took it for --prefix.
    result = run_cli("install", "--pre", "x", "--dry-run")
    assert result.code == 2
    assert "unrecognized arguments: --pre x" in result.err
    with pytest.raises(SystemExit):
        parse(["matrix", "check", "--rec"])  # --record, a nested command's flag


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "-v", "-q"],
        ["plan", "--no-gpu", "--verbose"],
        ["matrix", "check", "-q", "--verbose"],
        ["docker", "build", "-q"],
        ["verify", "--quiet"],
    ],
    ids=["short", "long", "nested", "docker", "verify"],
)
def test_every_command_takes_verbose_and_quiet(argv: list[str]) -> None:
    args = parse(argv)
    assert hasattr(args, "verbose")
    assert hasattr(args, "quiet")


@pytest.mark.subprocess
def test_verbose_logs_every_program_run() -> None:
    result = run_cli("plan", "--no-gpu", "-v")
    assert result.code == 0, result.err
    assert "verl-setup: debug: run (" in result.err
    assert "(timeout " in result.err


def test_help_names_the_exit_codes_and_the_variables() -> None:
    for argv in (["--help"], ["install", "--help"]):
        result = run_cli(*argv)
        assert result.code == 0
        assert "exit codes: 0 ok, 1 unexpected error, 2 bad input" in result.out
        assert "3 no matrix row" in result.out
        assert "VERL_SETUP_PROVE_EXTRA_INDEXES=1" in result.out
        assert "UV_CUDA_DRIVER_VERSION" in result.out


def test_the_last_status_line_is_ended_on_a_terminal() -> None:
    tty = Tty()
    progress = Progress(stream=tty)
    progress.step("plan", "row cpu")
    assert not tty.getvalue().endswith("\n")  # a live status line
    progress.step("done", "wrote the lock")
    assert tty.getvalue().endswith("done: wrote the lock\n")
    other = Tty()
    Progress(stream=other).step("venv", "creating")
    end_status_lines()  # what main does before an error line or the prompt
    assert other.getvalue().endswith("creating\n")


def test_the_json_command_name_is_read_from_the_command_line() -> None:
    assert json_command(["matrix", "check", "--json"]) == "matrix check"
    assert json_command(["plan", "-q", "--json"]) == "plan"
    assert json_command(["plan"]) is None
    assert json_command(["doctor", "--", "python", "--json"]) is None  # the launch command's flag

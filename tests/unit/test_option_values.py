"""Every option's value goes through one check: `--opt=--`, which Python 3.10-3.12's argparse
turns into [] behind its type and choices (a TypeError later, exit 1), is one usage line, exit 2."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from verl_setup.cli import SUBCOMMANDS, build_parser

PY310 = Path("/root/.pyenv/versions/3.10.13/bin/python")
REPO = Path(__file__).resolve().parents[2]


def _options(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """(command words..., --option) for every option that takes one value, in every subcommand."""
    out: list[tuple[str, ...]] = []
    for action in parser._actions:  # argparse lists its actions nowhere public
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _options(sub, (*words, name))
        elif action.option_strings and action.nargs is None and words:
            out.append((*words, max(action.option_strings, key=len)))
    return out


OPTIONS = _options(build_parser())


def test_every_command_has_options_to_check() -> None:
    # detect's options are flags; completion takes only its shell, a positional.
    assert {words[0] for words in OPTIONS} >= set(SUBCOMMANDS) - {"detect", "completion"}
    assert ("plan", "--driver") in OPTIONS
    assert ("install", "--prefix") in OPTIONS
    assert len(OPTIONS) > 60


@pytest.mark.parametrize("words", OPTIONS, ids=["-".join(w) for w in OPTIONS])
def test_an_option_given_as_opt_equals_dashdash_is_one_usage_line(words: tuple[str, ...]) -> None:
    *command, option = words
    result = run_cli(*command, f"{option}=--")
    assert result.code == 2, result.err
    assert result.err.count("\n") == 1
    assert f"argument {option}" in result.err or option in result.err


@pytest.mark.subprocess
@pytest.mark.skipif(not PY310.exists(), reason="pyenv's Python 3.10.13 is not here")
def test_opt_equals_dashdash_on_python_310(tmp_path: Path) -> None:
    """The argparse that drops the `--` (3.10), on the real CLI with its real dependencies."""
    uv = shutil.which("uv", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    assert uv is not None
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": str(tmp_path / "py310")}
    subprocess.run([uv, "venv", "-q", "-p", str(PY310), str(tmp_path / "py310")], check=True, env=env)
    subprocess.run([uv, "pip", "install", "-q", "-e", str(REPO)], check=True, env=env, timeout=300)
    for argv in (["plan", "--driver=--"], ["plan", "--gpu=--"], ["install", "--prefix=--", "--dry-run"]):
        result = subprocess.run(
            [str(tmp_path / "py310/bin/python"), "-m", "verl_setup", *argv],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines() == [
            f"verl-setup {argv[0]}: error: argument {argv[1][:-3]}: expected one value, got '--' (see --help)"
        ]

"""`verl-setup completion bash|zsh|fish`: print the completion script written at build time from the
parser (tasks/gen_completion.py, `make completion`), so it costs no parser and TAB runs no
Python."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

SHELLS = ("bash", "zsh", "fish")
FOLDER = Path(__file__).resolve().parent.parent / "completions"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The completion flags."""
    p.add_argument("shell", choices=SHELLS, help="the shell to write the script for")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:  # noqa: ARG001  # every command's signature
    """Print the script; `eval "$(verl-setup completion bash)"` or save it where the shell looks."""
    out.write((FOLDER / f"verl-setup.{args.shell}").read_text(encoding="utf-8"))
    return 0

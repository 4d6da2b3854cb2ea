"""Command line: the dispatch. Each command's flags and its run live in commands/NAME.py."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Collection, Sequence
from typing import NoReturn

from verl_setup import __version__
from verl_setup.errors import BadInputError, NoCompatibleRowError, VerlSetupError
from verl_setup.util.bounded import one_line

# name -> (module in commands/, one-line help), in --help order. The help is written here so that
# `--help` lists every command without importing any of them.
SUBCOMMANDS = {
    "detect": ("detect", "describe this host (GPUs, driver, Pythons, CUDA, tools)"),
    "plan": ("plan", "select the matrix row for a machine, and say why"),
    "matrix": ("matrix", "the compatibility data itself"),
    "render": ("render", "write the files that reproduce the planned environment"),
    "docker": ("docker", "build the rendered image for real"),
    "install": ("install", "uv venv + exact pins + verify, swapped into place atomically"),
    "lock": ("lock", "a hashed lock for the row's target Python and platform"),
    "verify": ("verify", "does an environment (or every Ray node) match its lock or row?"),
    "doctor": ("doctor", "the silent traps (Python, CUDA, Ray, HF cache, GPU memory, launch)"),
}


class _Parser(argparse.ArgumentParser):
    """argparse with a usage error as one line (the value escaped), like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see --help)\n")


def build_parser(only: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The command line, with the flags of the commands in `only` (None: every command's).

    Every command is listed either way; a command's module is imported only to add its flags.
    """
    parser = _Parser(
        prog="verl-setup",
        description="Detect a GPU host, select an evidence-backed verl stack, install it with uv.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=text)
        if only is None or name in only:
            importlib.import_module(f"verl_setup.commands.{module}").add_arguments(p)
    return parser


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line, building only the flags of the command named first."""
    argv = list(argv)
    command = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    # No command first: the top level's only options exit (--help, --version), anything else is
    # a usage error, so no command's flags are needed.
    return build_parser(() if command is None else (command,)).parse_args(argv)


BAD_INPUT = (BadInputError, NoCompatibleRowError)


def main_inner(argv: Sequence[str] | None = None) -> int:
    """Parse and run; errors propagate (tests call this)."""
    args = parse(sys.argv[1:] if argv is None else argv)
    return int(args.run(args, os.environ, sys.stdout))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: one clear line per error, and the documented exit code."""
    try:
        return main_inner(argv)
    except VerlSetupError as exc:
        # A bad value is echoed escaped and cut, so the error stays one line (a build failure's
        # log tail is meant to span lines).
        text = one_line(str(exc), limit=4000) if isinstance(exc, BAD_INPUT) else str(exc)
        sys.stderr.write(f"verl-setup: error: {text}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("verl-setup: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if os.environ.get("VERL_SETUP_DEBUG"):
            raise
        sys.stderr.write(
            f"verl-setup: unexpected error: {type(exc).__name__}: {one_line(str(exc))} "
            "(VERL_SETUP_DEBUG=1 shows more)\n"
        )
        return 1

"""Command line: the dispatch. Each command's flags and its run live in commands/NAME.py."""

from __future__ import annotations

import importlib
import os
import sys

from verl_setup import __version__
from verl_setup.errors import BadInputError, NoCompatibleRowError, VerlSetupError

# typing.TYPE_CHECKING without importing typing; argparse (with re) is imported only to parse a
# command: the top-level --help and --version are answered without it, at about bare Python's cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Collection, Sequence
    from typing import NoReturn

DESCRIPTION = "Detect a GPU host, select an evidence-backed verl stack, install it with uv."

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


def build_parser(only: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The command line, with the flags of the commands in `only` (None: every command's).

    Every command is listed either way; a command's module is imported only to add its flags.
    """
    import argparse  # noqa: PLC0415

    class Parser(argparse.ArgumentParser):
        """argparse with a usage error as one line (the value escaped), like every other bad input."""

        def error(self, message: str) -> NoReturn:
            self.exit(2, f"{self.prog}: error: {one_line(message)} (see --help)\n")

    parser = Parser(prog="verl-setup", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=text)
        if only is None or name in only:
            importlib.import_module(f"verl_setup.commands.{module}").add_arguments(p)
    return parser


def top_level_help(columns: int) -> str | None:
    """`verl-setup --help` as argparse prints it, without importing argparse (None: a terminal too
    narrow for this copy; argparse wraps the usage line there). A test holds the two equal."""
    width = columns - 2  # argparse's HelpFormatter: the terminal's columns less 2
    if width < 58:
        return None
    column = 14  # argparse's help position: the longest invocation, "  -h, --help", plus 2
    lines = ["usage: verl-setup [-h] [--version] COMMAND ...", "", *_wrap(DESCRIPTION, width), ""]
    lines += ["positional arguments:", "  COMMAND"]
    for name, (_, text) in SUBCOMMANDS.items():
        first, *rest = _wrap(text, width - column)
        lines += [f"    {name:<{column - 6}}  {first}", *(" " * column + line for line in rest)]
    lines += ["", "options:", "  -h, --help  show this help message and exit"]
    lines.append("  --version   show program's version number and exit")
    return "\n".join(lines) + "\n"


def _wrap(text: str, width: int) -> list[str]:
    """textwrap.wrap for plain prose (no regex): words, broken after a hyphen inside one."""
    chunks: list[str] = []
    for word in text.split():
        rest = word
        while "-" in rest[1:-1] and rest[rest.index("-", 1) - 1].isalnum():
            cut = rest.index("-", 1) + 1
            chunks.append(rest[:cut])
            rest = rest[cut:]
        chunks.append(rest)
    lines, line, glued = [], "", False
    for chunk in chunks:
        joined = line + chunk if glued or not line else f"{line} {chunk}"
        if line and len(joined) > width:
            lines.append(line)
            joined = chunk
        line, glued = joined, chunk.endswith("-")
    return [*lines, line]


def _columns() -> int:
    """shutil.get_terminal_size().columns, without importing shutil (it brings bz2 and lzma)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line, building only the flags of the command named first."""
    argv = list(argv)
    command = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    # No command first: the top level's only options exit (--help, --version), anything else is
    # a usage error, so no command's flags are needed.
    return build_parser(() if command is None else (command,)).parse_args(argv)


BAD_INPUT = (BadInputError, NoCompatibleRowError)


def one_line(text: str, limit: int | None = None) -> str:
    """util.bounded.one_line, imported only when an error is printed (--help never needs it)."""
    from verl_setup.util.bounded import one_line as line  # noqa: PLC0415

    return line(text) if limit is None else line(text, limit=limit)


def main_inner(argv: Sequence[str] | None = None) -> int:
    """Parse and run; errors propagate (tests call this)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    fast = top_level_help(_columns()) if argv in (["-h"], ["--help"]) else None
    if fast is not None or argv == ["--version"]:
        sys.stdout.write(fast or f"verl-setup {__version__}\n")
        return 0
    args = parse(argv)
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

"""Command line: the dispatch. Each command's flags and its run live in commands/NAME.py."""

from __future__ import annotations

import importlib
import os
import sys

from verl_setup.errors import BadInputError, NoCompatibleRowError, Stopped, VerlSetupError
from verl_setup.util.help_env import epilog, top_level

# typing.TYPE_CHECKING without importing typing; argparse (with re) is imported only to parse a
# command: the top-level --help and --version are answered without it, at about bare Python's cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Collection, Sequence
    from typing import Any, NoReturn

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
    "bundle": ("bundle", "a lock and its every wheel (and Python) in a folder, for `install --offline`"),
    "verify": ("verify", "does an environment (or every Ray node) match its lock or row?"),
    "smoke": ("smoke", "train: verl's own main_ppo, 2 GRPO steps on a tiny local model, in an env"),
    "wheelhouse": ("wheelhouse", "build a row's torch extensions once into a shared PEP 503 folder"),
    "doctor": ("doctor", "the silent traps (Python, CUDA, Ray, HF cache, GPU memory, launch)"),
    "completion": ("completion", "a shell completion script (bash, zsh, fish), written from this parser"),
    "diagnose": ("diagnose", "after a failed run: read its logs, name the first cause and a remedy"),
    "report": ("report", "one Markdown block for a bug report: host, row, verify, doctor, diagnose"),
}

# The commands with subcommands of their own: their envelopes name both words ("matrix check").
NESTED = ("matrix", "docker", "wheelhouse")

# The epilogs (exit codes, each command's own variables) are written in help_env.py.
EPILOG = top_level()


class UsageError(SystemExit):
    """argparse refused the command line (exit 2); the message is kept for the --json envelope."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


def build_parser(only: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The command line, with the flags of the commands in `only` (None: every command's).

    Every command is listed either way; a command's module is imported only to add its flags.
    """
    import argparse  # noqa: PLC0415

    class Parser(argparse.ArgumentParser):
        """argparse with a usage error as one line (the value escaped), like every other bad
        input, every option's value through one check before its type converts it, and no
        abbreviations (pip's and uv's --pre means pre-releases; here it meant --prefix). Every
        subparser is one of these."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("allow_abbrev", False)
            kwargs.setdefault("formatter_class", Formatter)
            super().__init__(*args, **kwargs)

        def error(self, message: str) -> NoReturn:
            text = f"{one_line(message)}{_did_you_mean(message)} (see --help)"
            sys.stderr.write(f"{self.prog}: error: {text}\n")
            raise UsageError(text)

        def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
            # Python 3.10-3.12 drop a `--` given as `--opt=--`, and an option that takes one value
            # then gets [] without its type or choices ever seeing it (a TypeError later).
            if action.option_strings and action.nargs is None and arg_strings in ([], ["--"]):
                self.error(f"argument {'/'.join(action.option_strings)}: expected one value, got '--'")
            return super()._get_values(action, arg_strings)

    class Formatter(argparse.HelpFormatter):
        """Prose wrapped as argparse does, the epilog (lines of its own) kept as written."""

        def _fill_text(self, text: str, width: int, indent: str) -> str:
            return text if "\n" in text else super()._fill_text(text, width, indent)

    parser = Parser(prog="verl-setup", description=DESCRIPTION, epilog=EPILOG)

    class Version(argparse.Action):
        """argparse's version action, its text (which reads matrices/) made only when asked."""

        def __call__(self, parser: argparse.ArgumentParser, *_: object, **__: object) -> NoReturn:
            from verl_setup.util.about import version_text  # noqa: PLC0415

            sys.stdout.write(version_text())
            parser.exit()

    parser.add_argument(
        "-V", "--version", action=Version, nargs=0, help="show program's version number and exit"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=text, epilog=EPILOG)
        if only is None or name in only:
            importlib.import_module(f"verl_setup.commands.{module}").add_arguments(p)
            for leaf in _leaves(p):
                _add_output_flags(leaf)
                words = leaf.prog.split()[1:]
                leaf.epilog = epilog(" ".join(words), {o for a in leaf._actions for o in a.option_strings})
    return parser


def _leaves(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers that run something: `matrix check`, not `matrix`."""
    import argparse  # noqa: PLC0415

    # argparse has no public walk over its subparsers
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [leaf for s in subs for child in s.choices.values() for leaf in _leaves(child)] or [parser]


def _add_output_flags(p: argparse.ArgumentParser) -> None:
    """-v, -q and --no-config on every command, as uv and pip have them."""
    g = p.add_argument_group("output")
    g.add_argument("-v", "--verbose", action="store_true", help="log every program run, with its timeout")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress lines (warnings still print)")
    g.add_argument(
        "--no-config",
        action="store_true",
        help="ignore verl-setup.toml and pyproject.toml's [tool.verl-setup]",
    )


def top_level_help(columns: int) -> str | None:
    """`verl-setup --help` as argparse prints it, without importing argparse (None: a terminal too
    narrow for this copy; argparse wraps the usage line there). A test holds the two equal."""
    width = columns - 2  # argparse's HelpFormatter: the terminal's columns less 2
    if width < 58:
        return None
    column = 17  # argparse's help position: the longest invocation, "  -V, --version", plus 2
    lines = ["usage: verl-setup [-h] [-V] COMMAND ...", "", *_wrap(DESCRIPTION, width), ""]
    lines += ["positional arguments:", "  COMMAND"]
    for name, (_, text) in SUBCOMMANDS.items():
        first, *rest = _wrap(text, width - column)
        if len(name) > column - 6:  # argparse puts a name too long for the column on a line of its own
            lines += [f"    {name}", *(" " * column + line for line in (first, *rest))]
        else:
            lines += [f"    {name:<{column - 6}}  {first}", *(" " * column + line for line in rest)]
    lines += ["", "options:", "  -h, --help     show this help message and exit"]
    lines.append("  -V, --version  show program's version number and exit")
    return "\n".join(lines) + "\n\n" + EPILOG + "\n"


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


def _did_you_mean(message: str) -> str:
    """` (did you mean 'install'?)` for argparse's "invalid choice: 'instal' (choose from ...)"."""
    if "invalid choice: " not in message:
        return ""
    import re  # noqa: PLC0415  # only a usage error needs it

    from verl_setup.util.vocab import suggest  # noqa: PLC0415

    given, *choices = re.findall(r"'([^']*)'", message.split("invalid choice: ", 1)[1])
    return suggest(given, choices) if choices else ""


def one_line(text: str, limit: int | None = None) -> str:
    """util.bounded.one_line, imported only when an error is printed (--help never needs it)."""
    from verl_setup.util.bounded import one_line as line  # noqa: PLC0415

    return line(text) if limit is None else line(text, limit=limit)


def main_inner(argv: Sequence[str] | None = None) -> int:
    """Parse and run; errors propagate (tests call this)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    fast = top_level_help(_columns()) if argv in (["-h"], ["--help"]) else None
    if fast is not None:
        sys.stdout.write(fast)
        return 0
    if argv in (["-V"], ["--version"]):
        from verl_setup.util.about import version_text  # noqa: PLC0415  # hashlib, re, pathlib

        sys.stdout.write(version_text())
        return 0
    args = parse(argv)
    if args.verbose:
        _log_to_stderr()
    if not args.no_config:
        from pathlib import Path  # noqa: PLC0415

        from verl_setup.plan.team_config import find_config  # noqa: PLC0415  # TOML only then

        args.team_config = find_config(Path.cwd(), os.environ)
        if args.team_config is not None:
            args.team_config.export(os.environ)
    return int(args.run(args, os.environ, sys.stdout))


def _log_to_stderr() -> None:
    """-v: the package's debug log (the runner logs every argv with its timeout) on stderr."""
    import logging  # noqa: PLC0415

    log = logging.getLogger("verl_setup")
    for old in [h for h in log.handlers if h.get_name() == "verbose"]:
        log.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name("verbose")
    handler.setFormatter(logging.Formatter("verl-setup: debug: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)


def json_command(argv: Sequence[str]) -> str | None:
    """The command's name for its --json envelope ("matrix check"), or None without --json."""
    words = list(argv[: argv.index("--")] if "--" in argv else argv)
    if "--json" not in words or not words or words[0] not in SUBCOMMANDS:
        return None
    nested = words[0] in NESTED and len(words) > 1 and not words[1].startswith("-")
    return f"{words[0]} {words[1]}" if nested else words[0]


def _end_status_lines() -> None:
    """End a terminal's status line before the prompt or an error (only if a reporter ran)."""
    output = sys.modules.get("verl_setup.output")
    if output is not None:
        output.end_status_lines()


def _json_failure(command: str | None, exc: VerlSetupError) -> None:
    if command is not None and not exc.reported:
        from verl_setup.output import envelope  # noqa: PLC0415

        sys.stdout.write(envelope(command, exc.data, error=exc))


def path_refusal(exc: BaseException) -> VerlSetupError | None:
    """A path the user gave that the filesystem refuses outright: a component over 255 bytes
    (pathlib's exists() and is_dir() raise ENAMETOOLONG rather than answer), a symlink loop
    (resolve() raises RuntimeError, open() ELOOP); the error for it, else None."""
    import errno  # noqa: PLC0415

    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
        name = one_line(str(exc.filename or ""), limit=120)
        return BadInputError(
            f"{name}: a file name in this path is too long for the filesystem (over 255 bytes)"
        )
    if isinstance(exc, OSError) and exc.errno == errno.ELOOP:
        return BadInputError(f"{one_line(str(exc.filename or ''), limit=200)}: a symlink loop")
    if isinstance(exc, RuntimeError) and str(exc).startswith("Symlink loop"):
        return BadInputError(
            f"{one_line(str(exc).removeprefix('Symlink loop from '), limit=200)}: a symlink loop"
        )
    return None


def _unexpected(exc: Exception, command: str | None) -> int:
    bad = path_refusal(exc)
    if bad is not None:  # P1, P2: a path no filesystem call can take is bad input, not a crash
        _json_failure(command, bad)
        sys.stderr.write(f"verl-setup: error: {one_line(str(bad), limit=600)}\n")
        return bad.exit_code
    if os.environ.get("VERL_SETUP_DEBUG"):
        raise exc
    sys.stderr.write(
        f"verl-setup: unexpected error: {type(exc).__name__}: {one_line(str(exc))} "
        "(VERL_SETUP_DEBUG=1 shows more)\n"
    )
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: one clear line per error, and the documented exit code; under --json the
    failure is also the envelope on stdout."""
    argv = list(sys.argv[1:] if argv is None else argv)
    from verl_setup.util.terminal import Neutral  # noqa: PLC0415

    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Neutral(sys.stdout), Neutral(sys.stderr)  # K1
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = streams


def _main(argv: list[str]) -> int:
    command = json_command(argv)
    try:
        code = main_inner(argv)
    except VerlSetupError as exc:
        _end_status_lines()
        _json_failure(command, exc)
        # A bad value is echoed escaped and cut, so the error stays one line (a build failure's
        # log tail is meant to span lines).
        text = one_line(str(exc), limit=4000) if isinstance(exc, BAD_INPUT) else str(exc)
        sys.stderr.write(f"verl-setup: error: {text}\n")
        return exc.exit_code
    except UsageError as exc:
        _json_failure(command, BadInputError(exc.message))
        raise
    except Stopped as exc:
        import signal  # noqa: PLC0415  # only a stopped run needs the signal's name

        _end_status_lines()
        sys.stderr.write(f"verl-setup: {exc or 'stopped by ' + signal.Signals(exc.signum).name}\n")
        return 128 + exc.signum
    except KeyboardInterrupt:
        _end_status_lines()
        sys.stderr.write("verl-setup: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001  # the last resort: one line, exit 1 (or 2 for a path)
        _end_status_lines()
        return _unexpected(exc, command)
    else:
        _end_status_lines()
        return code

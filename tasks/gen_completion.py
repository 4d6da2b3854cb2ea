"""Write the shell completion scripts from the parser itself (every command, flag, render target,
check id and closed choice):

    python tasks/gen_completion.py      # `make completion`

A build task outside the package, as pdm's are: the scripts go into verl_setup/completions/, where
they are committed and shipped, and `verl-setup completion SHELL` only prints one, so neither TAB
nor the command builds a parser. tests/unit/test_completion.py fails when the committed scripts
differ from what the parser gives now.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "installer"))

from verl_setup.commands.completion import FOLDER, SHELLS
from verl_setup.util.vocab import CHECK_IDS, RENDER_TARGETS

PROG = "verl-setup"


def script_path(shell: str, folder: Path = FOLDER) -> Path:
    """Where the committed script for `shell` lies in the package."""
    return folder / f"{PROG}.{shell}"


def scripts(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each shell's script, from this parser."""
    words = walk(parser)
    return {shell: fish(words) if shell == "fish" else bash(words, zsh=shell == "zsh") for shell in SHELLS}


def write_all(parser: argparse.ArgumentParser, folder: Path = FOLDER) -> list[Path]:
    """Write every shell's script from the whole parser into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for shell, text in scripts(parser).items():
        path = script_path(shell, folder)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


@dataclass(frozen=True)
class Words:
    """What can follow each command path ("" is the top level, "matrix check" a nested one)."""

    commands: dict[str, list[str]]  # path -> its subcommands
    options: dict[str, list[str]]  # path -> its option strings
    choices: dict[str, list[str]]  # option or "path:positional" -> its closed choices


def walk(parser: argparse.ArgumentParser) -> Words:
    """Every command path of the parser with its subcommands, options and choices."""
    words = Words(commands={}, options={}, choices={})

    def visit(p: argparse.ArgumentParser, path: str) -> None:
        words.options[path] = [s for a in p._actions for s in a.option_strings]  # no public walk
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                words.commands[path] = list(action.choices)
                for name, child in action.choices.items():
                    visit(child, f"{path} {name}".strip())
            elif action.choices and action.option_strings:
                for option in action.option_strings:
                    words.choices[option] = [str(c) for c in action.choices]
            elif action.choices:
                words.choices[f"{path}:positional"] = [str(c) for c in action.choices]
        if path == "render":  # checked by hand, not by argparse: several targets, plus "all"
            words.choices["render:positional"] = [*RENDER_TARGETS, "all"]
        if path == "doctor":
            words.choices["--check"] = list(CHECK_IDS)
        if "--gpu" in words.options[path]:  # values from the data, not argparse (issue 32)
            words.choices["--gpu"] = gpu_words()
        if "--row" in words.options[path]:
            words.choices["--row"] = row_words()

    visit(parser, "")
    return words


def bash(words: Words, *, zsh: bool) -> str:
    """A bash completion function (zsh loads it through bashcompinit)."""
    nested = " ".join(p for p in words.commands if p)
    cases = []
    for path, options in words.options.items():
        offer = [*words.commands.get(path, []), *words.choices.get(f"{path}:positional", []), *options]
        cases.append(f"    {shlex.quote(path)}) opts={shlex.quote(' '.join(offer))} ;;")
    values = [
        f"    {opt}) opts={shlex.quote(' '.join(c))} ;;" for opt, c in words.choices.items() if ":" not in opt
    ]
    head = "autoload -U +X bashcompinit && bashcompinit\n" if zsh else ""
    shell = "zsh" if zsh else "bash"
    return f"""{head}# {PROG} completion for {shell}, written from its parser by `make completion`.
_verl_setup() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} path="" word i opts=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${{COMP_WORDS[i]}}
    [[ $word == -* ]] && continue
    if [[ -z $path ]]; then path=$word
    elif [[ " {nested} " == *" $path "* ]]; then path="$path $word"
    fi
  done
  case "$prev" in
{chr(10).join(values)}
  esac
  if [[ -z $opts ]]; then
    case "$path" in
{chr(10).join(cases)}
    esac
  fi
  mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
}}
complete -o default -F _verl_setup {PROG}
"""


def fish(words: Words) -> str:
    """fish `complete` lines: subcommands by position, each command's flags and choices."""
    lines = [
        f"# {PROG} completion for fish, written from its parser by `make completion`.",
        f"complete -c {PROG} -f",
    ]
    for path, subs in words.commands.items():
        seen = " ".join(path.split())
        condition = (
            "__fish_use_subcommand"
            if not path
            else f"__fish_seen_subcommand_from {seen}; and not __fish_seen_subcommand_from {' '.join(subs)}"
        )
        lines.append(f"complete -c {PROG} -n {shlex.quote(condition)} -a {shlex.quote(' '.join(subs))}")
    for path, options in words.options.items():
        if not path or path in words.commands:
            continue
        condition = f"__fish_seen_subcommand_from {path.split()[-1]}"
        positional = words.choices.get(f"{path}:positional")
        if positional:
            lines.append(
                f"complete -c {PROG} -n {shlex.quote(condition)} -a {shlex.quote(' '.join(positional))}"
            )
        for option in options:
            flag = f"-l {option[2:]}" if option.startswith("--") else f"-s {option[1:]}"
            choices = words.choices.get(option)
            values = f" -x -a {shlex.quote(' '.join(choices))}" if choices else ""
            lines.append(f"complete -c {PROG} -n {shlex.quote(condition)} {flag}{values}")
    return "\n".join(lines) + "\n"


def gpu_words() -> list[str]:
    """GPU names as typed at --gpu, one word each (the GPU table's examples: H100, 4090, ...),
    only those plan resolves to a compute capability."""
    from verl_setup.matrix.gpus import load_gpu_table  # noqa: PLC0415
    from verl_setup.matrix.load import load_matrix  # noqa: PLC0415
    from verl_setup.plan.typed_names import gpu_capability  # noqa: PLC0415

    rules = load_matrix(None).cuda
    out: list[str] = []
    for chip in load_gpu_table().facts.chips.values():
        for example in (chip.example or "").split(", "):
            word = example.removeprefix("GeForce RTX ").removeprefix("GeForce ")
            if (
                word
                and " " not in word
                and word not in out
                and gpu_capability(word, rules.compute_capability)
            ):
                out.append(word)
    return out


def row_words() -> list[str]:
    """The bundled matrix's row ids."""
    from verl_setup.matrix.load import load_matrix  # noqa: PLC0415

    return [row.id for row in load_matrix(None).rows]


if __name__ == "__main__":
    from verl_setup.cli import build_parser

    for written in write_all(build_parser()):
        print(written)

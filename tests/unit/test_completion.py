"""`verl-setup completion`: scripts written from the parser, completed by the real shells."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.docs_task import gen_completion
from verl_setup.cli import build_parser
from verl_setup.commands.completion import FOLDER

TASK = gen_completion()  # tasks/gen_completion.py: `make completion`
script_path, scripts, walk, write_all = TASK.script_path, TASK.scripts, TASK.walk, TASK.write_all


def script(shell: str, tmp_path: Path) -> Path:
    result = run_cli("completion", shell)
    assert result.code == 0, result.err
    path = tmp_path / f"verl-setup.{shell}"
    path.write_text(result.out)
    return path


def shell_or_skip(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed (.ci/run installs it)")
        pytest.skip(f"{name} is not installed (apt-get install {name})")
    return found


def test_the_committed_scripts_are_what_the_parser_gives_now() -> None:
    """Written at build time (`make completion`): a new command or flag needs them written again."""
    for shell, text in scripts(build_parser()).items():
        assert script_path(shell).read_text() == text, f"{script_path(shell)} is stale: run `make completion`"
    assert sorted(p.name for p in FOLDER.iterdir()) == [
        "verl-setup.bash",
        "verl-setup.fish",
        "verl-setup.zsh",
    ]


def test_completion_prints_the_committed_file_without_building_every_command(tmp_path: Path) -> None:
    written = write_all(build_parser(), tmp_path)  # what `make completion` does, here into tmp_path
    assert [p.read_text() for p in written] == [script_path(s).read_text() for s in ("bash", "zsh", "fish")]
    parser = build_parser(("completion",))  # as `verl-setup completion` parses: one command's flags
    assert scripts(parser)["bash"] != script_path("bash").read_text()  # which could not write it
    assert run_cli("completion", "bash").out == script_path("bash").read_text()


def test_every_flag_of_every_command_is_offered(tmp_path: Path) -> None:
    words = walk(build_parser())
    assert set(words.commands["matrix"]) == {"list", "show", "validate", "prove", "check", "propose"}
    text = script("bash", tmp_path).read_text()
    for path, options in words.options.items():
        assert all(o in text for o in options), path
    assert "--no-config" in words.options["matrix check"]
    assert words.choices["--engine"] == ["vllm", "sglang", "none"]


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (["matrix", "ch"], ["check"]),
        (["plan", "--engine", ""], ["vllm", "sglang", "none"]),
        (["doctor", "--check", "hf"], ["hf-cache"]),
        (["render", "sl"], ["slurm"]),
        (["completion", "f"], ["fish"]),
        (["lock", "--no-g"], ["--no-gpu"]),
        (["plan", "--gpu", "H1"], ["H100"]),  # issue 32: values, not flags
        (["plan", "--gpu", "409"], ["4090"]),
        (["install", "--row", "verl0.9-vllm0.24.0-a"], ["verl0.9-vllm0.24.0-aarch64"]),
    ],
    ids=["nested", "choices", "check-ids", "render-targets", "shells", "flag", "gpu", "gpu-number", "row"],
)
def test_bash_completes_commands_flags_and_choices(
    tmp_path: Path, line: list[str], expected: list[str]
) -> None:
    path = script("bash", tmp_path)
    words = " ".join(f"'{w}'" for w in ["verl-setup", *line])
    code = (
        f'source {path}; COMP_WORDS=({words}); COMP_CWORD={len(line)}; _verl_setup; echo "${{COMPREPLY[@]}}"'
    )
    out = subprocess.run(["bash", "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.split() == expected


@pytest.mark.subprocess
def test_fish_completes_from_its_script(tmp_path: Path) -> None:
    fish = shell_or_skip("fish")
    path = script("fish", tmp_path)
    code = f'source {path}; complete -C "verl-setup matrix ch"; complete -C "verl-setup plan --engine "'
    out = subprocess.run([fish, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.split() == ["check", "none", "sglang", "vllm"]


@pytest.mark.subprocess
def test_zsh_registers_the_function(tmp_path: Path) -> None:
    zsh = shell_or_skip("zsh")
    path = script("zsh", tmp_path)
    init = f"autoload -U compinit && compinit -u -d {tmp_path}/zcompdump"
    code = f"{init}; source {path}; print -- ${{_comps[verl-setup]}}"
    out = subprocess.run([zsh, "-f", "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "_bash_complete -o default -F _verl_setup"

"""Every `verl-setup` line in the README's and the getting-started pages' shell blocks parses with
the real parser, and the team page's GitHub Actions workflow is YAML whose lines parse too."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from verl_setup.cli import parse

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
TEAM = ROOT / "docs" / "getting-started" / "team.md"
MARK = "# .github/workflows/verl-setup.yml\n"
PAGES = [README, *sorted((ROOT / "docs" / "getting-started").glob("*.md"))]


def workflow() -> dict[Any, Any]:
    text = TEAM.read_text(encoding="utf-8")
    start = text.index(MARK)
    data = yaml.safe_load(text[start : text.index("```", start)])
    assert isinstance(data, dict)
    return data


def shell_lines(page: Path) -> list[str]:
    """The `verl-setup ...` lines of a page's ```sh blocks (a redirect and a comment left off)."""
    blocks = re.findall(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.startswith("verl-setup ")]


def argv_of(line: str) -> list[str]:
    return shlex.split(line.split(" > ", 1)[0], comments=True)[1:]


def test_the_workflow_runs_matrix_check_and_verify_and_doctor_with_real_flags() -> None:
    data = workflow()
    lines = [step["run"] for job in data["jobs"].values() for step in job["steps"] if "run" in step]
    commands = [shlex.split(line.split(">", 1)[0]) for line in lines if line.startswith("verl-setup ")]
    parsed = [parse(argv[1:]) for argv in commands]  # SystemExit(2) on a flag that does not exist
    assert [a.command for a in parsed] == ["matrix", "install", "verify", "doctor"]
    assert parsed[0].json
    assert parsed[3].json
    triggers = data[True]  # YAML 1.1 reads the key `on` as true; GitHub reads it as "on"
    assert triggers["schedule"][0]["cron"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_line_on_the_page_parses(page: Path) -> None:
    lines = shell_lines(page)
    assert lines, f"{page.name} shows no verl-setup command"
    for line in lines:
        argv = argv_of(line)
        if argv in (["-V"], ["--version"]):
            continue  # answered before the parser (tests/unit/test_cli.py)
        parse(argv)  # SystemExit(2) names a flag or value that does not exist


def test_the_readme_is_short_and_starts_each_user_with_a_real_install() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) <= 15 * 1024
    for heading in ("The researcher", "The platform engineer", "The team", "After a failure"):
        assert f"## {heading}" in text
    researcher = shell_lines(README)
    assert "verl-setup install --with-editable ./verl --with math-verify" in researcher
    for tool in ("uv tool install verl-setup", "pipx install verl-setup", "uvx verl-setup"):
        assert tool in text
    assert "make run" in text
    assert "make test" in text


def test_the_release_workflow_checks_builds_installs_and_publishes_with_trusted_publishing() -> None:
    data = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8"))
    build, publish = data["jobs"]["build"], data["jobs"]["publish"]
    script = "\n".join(step.get("run", "") for step in build["steps"])
    assert "uv build" in script
    assert "twine check --strict dist/*" in script
    lines = [line.split("verl-setup ", 1)[1] for line in script.splitlines() if "/bin/verl-setup " in line]
    assert len(lines) == 2
    for line in lines:
        argv = shlex.split(line)
        if argv != ["-V"]:
            parse(argv)
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["steps"][-1]["uses"].startswith("pypa/gh-action-pypi-publish@")

"""The README's GitHub Actions workflow is YAML, and each of its verl-setup lines parses."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from verl_setup.cli import parse

README = Path(__file__).parents[2] / "README.md"
MARK = "# .github/workflows/verl-setup.yml\n"


def workflow() -> dict[Any, Any]:
    text = README.read_text(encoding="utf-8")
    start = text.index(MARK)
    data = yaml.safe_load(text[start : text.index("```", start)])
    assert isinstance(data, dict)
    return data


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

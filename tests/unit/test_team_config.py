"""A team's committed defaults (verl-setup.toml, or [tool.verl-setup] in pyproject.toml): below
the VERL_SETUP_* variables, above detection; --no-config ignores them; a typo is one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import json_data, run_cli

GPU_NODE = ("plan", "--driver", "580.95.05", "--gpu", "H100", "--json")


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "verl-setup.toml").write_text('python = "3.11"\nengine = "sglang"\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_team_config_fills_in_what_no_flag_or_variable_gives(team: Path) -> None:
    result = run_cli(*GPU_NODE)
    assert result.code == 0, result.err
    facts = json_data(result.out)["facts"]
    assert facts["python"] == {"value": "3.11", "source": f"config {team / 'verl-setup.toml'} (python)"}
    assert facts["engine"]["value"] == "sglang"
    assert json_data(result.out)["row"]["engine"]["name"] == "sglang"


@pytest.mark.usefixtures("team")
def test_variables_and_flags_beat_the_team_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERL_SETUP_PYTHON", "3.12")
    facts = json_data(run_cli(*GPU_NODE, "--engine", "vllm").out)["facts"]
    assert facts["python"]["source"] == "env VERL_SETUP_PYTHON"
    assert facts["engine"] == {"value": "vllm", "source": "flag --engine"}
    assert facts["backend"]["source"] == "default"


@pytest.mark.usefixtures("team")
def test_no_config_ignores_it() -> None:
    facts = json_data(run_cli(*GPU_NODE, "--no-config").out)["facts"]
    assert facts["python"]["source"] == "not requested"


def test_pyproject_tool_table_is_found_from_a_subfolder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.verl-setup]\nrow = "cpu"\n')
    (tmp_path / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "src" / "deep")
    data = json_data(run_cli(*GPU_NODE).out)
    assert data["row"]["id"] == "cpu"


def test_a_pyproject_without_the_table_is_not_a_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    monkeypatch.chdir(tmp_path)
    assert json_data(run_cli(*GPU_NODE).out)["facts"]["python"]["source"] == "not requested"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('pyhton = "3.11"\n', "unknown key 'pyhton' (did you mean 'python'?)"),
        ("python = 3.11\n", "python must be a non-empty string"),
        ("python = \n", "is not TOML we can read"),
    ],
    ids=["typo", "number", "bad-toml"],
)
def test_a_bad_config_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    (tmp_path / "verl-setup.toml").write_text(text)
    monkeypatch.chdir(tmp_path)
    result = run_cli(*GPU_NODE)
    assert result.code == 2
    assert message in result.err
    assert len(result.err.splitlines()) == 1
    assert json.loads(result.out)["error"]["code"] == 2


@pytest.mark.subprocess
def test_the_team_prefix_is_where_install_goes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "verl-setup.toml").write_text('prefix = "envs/verl"\n')
    monkeypatch.chdir(tmp_path)
    result = run_cli("install", "--no-gpu", "--dry-run", "--json")
    assert result.code == 0, result.err
    assert json_data(result.out)["prefix"] == str(tmp_path / "envs/verl")

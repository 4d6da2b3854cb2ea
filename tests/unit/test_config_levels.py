"""The user's and the site's config files beside the project's: a key at a higher level wins
(project > user > site, all below flags and variables); each value names its file in
`plan --explain`; the user and site levels hold only where things are (prefix, CA bundle, index,
wheel sources); the CA bundle and the index reach uv and the tool's downloads, below the
environment; an unknown key is one line naming the allowed ones."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from tests.conftest import json_data, run_cli
from verl_setup.commands.common import wheel_sources
from verl_setup.errors import BadInputError
from verl_setup.plan import team_config

GPU_NODE = ("plan", "--driver", "580.95.05", "--gpu", "H100")


@pytest.fixture
def levels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A site, a user and a project file; the working folder is the project's."""
    site = tmp_path / "etc" / "verl-setup" / "config.toml"
    user = tmp_path / "xdg" / "verl-setup" / "config.toml"
    project = tmp_path / "project" / "verl-setup.toml"
    for path in (site, user, project):
        path.parent.mkdir(parents=True)
    (site.parent / "site-wheels").mkdir()
    (user.parent / "my-wheels").mkdir()
    site.write_text(
        'prefix = "/opt/verl"\nca_bundle = "/etc/ssl/site-ca.pem"\nindex_url = "https://mirror.site/simple"\n'
        'wheel_sources = ["site-wheels"]\n'
    )
    user.write_text('prefix = "envs/verl"\nwheel_sources = ["my-wheels"]\n')
    project.write_text('python = "3.11"\n')
    monkeypatch.setattr(team_config, "SITE_CONFIG", site)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(project.parent)
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "UV_DEFAULT_INDEX"):
        monkeypatch.setenv(name, "")  # recorded, so the test's exports are undone after it
        monkeypatch.delenv(name)
    return {"site": site, "user": user, "project": project}


def test_a_higher_level_wins_key_by_key_and_each_value_names_its_file(levels: dict[str, Path]) -> None:
    found = team_config.find_config(Path.cwd(), os.environ)
    assert found is not None
    assert found.values["prefix"] == str(levels["user"].parent / "envs/verl")  # user over site
    assert found.source_of("prefix") == f"config {levels['user']}"
    assert found.values["ca_bundle"] == "/etc/ssl/site-ca.pem"  # only the site sets it
    assert found.source_of("ca_bundle") == f"config {levels['site']}"
    assert found.values["python"] == "3.11"
    assert found.source_of("python") == f"config {levels['project']}"
    assert found.lists["wheel_sources"] == (str(levels["user"].parent / "my-wheels"),)  # relative to its file


def test_plan_explain_shows_each_setting_with_its_file(levels: dict[str, Path]) -> None:
    result = run_cli(*GPU_NODE, "--explain")
    assert result.code == 0, result.err
    assert f"config {levels['project']} (python): python 3.11" in result.out  # facts grouped by source
    assert (
        f"config     prefix = {levels['user'].parent / 'envs/verl'}  <- config {levels['user']}" in result.out
    )
    assert f"config     ca_bundle = /etc/ssl/site-ca.pem  <- config {levels['site']}" in result.out
    assert (
        f"config     wheel_sources = {levels['user'].parent / 'my-wheels'}  <- config {levels['user']}"
        in (result.out)
    )
    facts = json_data(run_cli(*GPU_NODE, "--json").out)["facts"]
    assert facts["python"]["source"] == f"config {levels['project']} (python)"


@pytest.mark.usefixtures("levels")
def test_the_ca_bundle_and_the_index_reach_the_environment_below_a_variable_already_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UV_DEFAULT_INDEX", "https://mine/simple")
    assert run_cli(*GPU_NODE).code == 0
    assert os.environ["SSL_CERT_FILE"] == "/etc/ssl/site-ca.pem"
    assert os.environ["REQUESTS_CA_BUNDLE"] == "/etc/ssl/site-ca.pem"
    assert os.environ["UV_DEFAULT_INDEX"] == "https://mine/simple"  # environment > config


@pytest.mark.usefixtures("levels")
def test_no_config_reads_no_level() -> None:
    result = run_cli(*GPU_NODE, "--explain", "--no-config")
    assert result.code == 0, result.err
    assert "config " not in result.out
    assert "SSL_CERT_FILE" not in os.environ


def test_the_user_level_holds_only_where_things_are(levels: dict[str, Path]) -> None:
    levels["user"].write_text('engine = "sglang"\n')
    with pytest.raises(BadInputError) as caught:
        team_config.find_config(Path.cwd(), os.environ)
    message = str(caught.value)
    assert "\n" not in message
    assert f"{levels['user']}" in message
    assert "unknown key 'engine'" in message
    assert "known: prefix, ca_bundle, index_url, wheel_sources" in message
    assert run_cli(*GPU_NODE).code == 2


def test_the_config_wheel_sources_come_after_the_flags(levels: dict[str, Path]) -> None:
    args = argparse.Namespace(
        wheel_source=["/flag/wheels"], team_config=team_config.find_config(Path.cwd(), os.environ)
    )
    assert wheel_sources(args) == ("/flag/wheels", str(levels["user"].parent / "my-wheels"))


def test_the_user_file_is_under_xdg_config_home_else_home() -> None:
    assert team_config.user_config_path({"XDG_CONFIG_HOME": "/x"}) == Path("/x/verl-setup/config.toml")
    assert team_config.user_config_path({"HOME": "/home/a"}) == Path("/home/a/.config/verl-setup/config.toml")

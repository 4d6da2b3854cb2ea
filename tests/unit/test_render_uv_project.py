"""`render uv-project`: the TOML quoting filter round-trips every string, and the rendered
pyproject.toml says what the recipe says (routing, no-deps metadata, git sources, what is left out).
The real `uv lock` and `uv sync` are in tests/integration/test_uv_project.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import host
from tests.render_scenarios import SCENARIOS, Scenario, plan_for, render_scenario
from verl_setup.errors import BadInputError
from verl_setup.matrix.load import load_matrix
from verl_setup.plan.request import Request
from verl_setup.plan.select import plan_row
from verl_setup.plan.target import build_target
from verl_setup.plan.team_config import find_team_config
from verl_setup.render.quoting import toml
from verl_setup.render.templates import TARGETS, RenderedFile, RenderOptions, expand_targets, render
from verl_setup.util.versions import minor_of

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 reads TOML with tomli (a dependency there)
    import tomli as tomllib

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)  # no lone surrogates


@given(TEXT)
def test_the_toml_filter_round_trips_any_text_as_a_value_and_as_a_key(text: str) -> None:
    doc = tomllib.loads(f"value = {toml(text)}\n{toml(text)} = 1\n[table]\n{toml(text)} = {toml(text)}\n")
    assert doc["value"] == text
    assert doc[text] == 1 or text == "value"
    assert doc["table"] == {text: text}


def test_the_toml_filter_refuses_a_lone_surrogate() -> None:
    with pytest.raises(BadInputError, match="not valid Unicode"):
        toml("a\udc80b")


def pyproject(files: list[RenderedFile]) -> dict[str, Any]:
    doc: dict[str, Any] = tomllib.loads(next(f.content for f in files if f.name == "pyproject.toml"))
    return doc


def uv_project(scenario: Scenario, **options: Any) -> dict[str, Any]:
    merged = {**scenario.options, **options}
    return pyproject(render(plan_for(scenario), RenderOptions(targets=("uv-project",), **merged)))


def row_project(row: str, request: dict[str, Any], **options: Any) -> dict[str, Any]:
    """The uv project of a named row (as `--row ID`), for a machine without a GPU."""
    matrix = load_matrix()
    machine = host()
    target = build_target(
        Request(no_gpu=True, **request),
        env={},
        rules=matrix.cuda,
        detect=lambda: machine,
        load_host=lambda _path: machine,
    )
    plan = plan_row(target, matrix, row)
    return pyproject(render(plan, RenderOptions(targets=("uv-project",), **options)))


def test_all_leaves_out_the_target_that_resolves() -> None:
    assert "uv-project" in TARGETS
    assert "uv-project" not in expand_targets(["all"])
    assert expand_targets(["all", "uv-project"])[-1] == "uv-project"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_every_scenario_is_a_uv_project_of_the_row_for_its_python(scenario: Scenario, tmp_path: Path) -> None:
    files = {f.name: f.content for f in render_scenario(scenario, ("uv-project",))}
    plan = plan_for(scenario)
    doc = tomllib.loads(files["pyproject.toml"])
    assert files[".python-version"] == plan.python + "\n"
    minor = minor_of(plan.python)
    assert doc["project"]["requires-python"] == f"=={minor}.*"
    assert doc["project"]["dependencies"][0] == plan.row.requirements()[0]  # verl with its extras
    uv = doc["tool"]["uv"]
    assert uv["package"] is False
    assert uv["no-build"] is True
    assert uv["environments"] == [
        f"sys_platform == 'linux' and platform_machine == '{plan.row.requires.arch[0]}'"
    ]
    assert uv.get("override-dependencies", []) == list(plan.row.overrides)
    assert "conflicts" not in uv  # one row: nothing to keep apart
    # verl-setup itself reads the folder's [tool.verl-setup] as a team config.
    (tmp_path / "pyproject.toml").write_text(files["pyproject.toml"])
    config = find_team_config(tmp_path)
    assert config is not None
    assert config.values == {"row": plan.row.id, "python": plan.python}


def test_a_wheel_from_an_index_is_routed_to_that_index_only() -> None:
    doc = row_project("verl0.9-vllm0.24.0", {"python": "3.12.3", "glibc": "2.39"})
    wheelhouse = next(s for s in load_matrix().rows_file.wheel_sources if s.id == "verl-wheelhouse")
    assert wheelhouse.url is not None
    url = wheelhouse.url.format(cuda_tag="cu130", torch_minor="2.11")  # the torch 2.11 world's index
    assert doc["tool"]["uv"]["index"] == [{"name": "verl-wheelhouse", "url": url, "explicit": True}]
    assert doc["tool"]["uv"]["sources"] == {"flash-attn": {"index": "verl-wheelhouse"}}
    assert "flash-attn==2.8.3" in doc["project"]["dependencies"]


def test_a_release_asset_wheel_is_a_url_source() -> None:
    doc = row_project("verl0.4-vllm0.8.5", {"python": "3.10.12"})
    url = doc["tool"]["uv"]["sources"]["flash-attn"]["url"]
    assert url.startswith("https://github.com/Dao-AILab/flash-attention/releases/download/v2.7.4.post1/")
    assert url.endswith("-cp310-cp310-linux_x86_64.whl")
    assert "index" not in doc["tool"]["uv"]


def test_a_row_on_an_extra_index_routes_its_torch_family_there() -> None:
    doc = row_project("verl0.7-vllm0.12.0-cu129", {}, extensions={"flash-attn": "without"})
    (index,) = doc["tool"]["uv"]["index"]
    url = load_matrix().rows_file.indexes["pytorch-cu129"].url
    assert index == {"name": "pytorch-cu129", "url": url, "explicit": True}
    routed = {n: s for n, s in doc["tool"]["uv"]["sources"].items() if s == {"index": "pytorch-cu129"}}
    assert sorted(routed) == ["torch", "torchaudio", "torchvision"]
    assert "torch==2.9.0+cu129" in doc["project"]["dependencies"]


def test_no_deps_packages_get_empty_metadata_and_a_git_source_its_revision() -> None:
    megatron = next(s for s in SCENARIOS if s.name == "h100-drv535-forward-megatron")
    files = render(plan_for(megatron), RenderOptions(targets=("uv-project",), **megatron.options))
    doc = pyproject(files)
    assert doc["tool"]["uv"]["dependency-metadata"] == [
        {"name": "megatron-bridge", "version": "0.5.0", "requires-dist": []},
        {"name": "mbridge", "requires-dist": []},  # a git source is pinned by its revision
    ]
    assert doc["tool"]["uv"]["sources"]["mbridge"] == {
        "git": "https://github.com/ISEEKYAN/mbridge.git",
        "rev": "641a5a0",
    }
    assert "mbridge" in doc["tool"]["uv"]["no-binary-package"]  # a source tree is built on purpose
    deps = doc["project"]["dependencies"]
    # Built against torch (or left out): not in the project, and the file says how to add them.
    assert not any(d.startswith(("flash-attn", "transformer-engine-torch", "apex")) for d in deps)
    text = next(f.content for f in files if f.name == "pyproject.toml")
    assert "# Not in this project: transformer-engine-torch 2.16.1" in text
    assert "--no-build-isolation" in text  # the build commands setup-venv.sh runs
    assert "# Not in this project: apex 0.1: left out (--without apex)" in text


def test_mbridge_left_out_leaves_no_source_behind() -> None:
    megatron = next(s for s in SCENARIOS if s.name == "h100-drv535-forward-megatron")
    options = {**megatron.options["extensions"], "mbridge": "without"}
    doc = uv_project(megatron, extensions=options)
    assert "mbridge" not in doc["tool"]["uv"].get("sources", {})
    assert [m["name"] for m in doc["tool"]["uv"]["dependency-metadata"]] == ["megatron-bridge"]
    assert "mbridge" not in doc["project"]["dependencies"]


def test_a_hostile_wheel_source_stays_one_toml_string() -> None:
    hostile = "https://127.0.0.1/a\"b\\c'd$(touch X)\t]= 1"
    doc = row_project("verl0.9-vllm0.24.0", {"python": "3.12.3"}, wheel_sources=(hostile,))
    assert doc["tool"]["uv"]["index"][0]["url"] == hostile + "/"
    assert doc["tool"]["uv"]["sources"] == {"flash-attn": {"index": "flash-attn-wheels"}}

"""TransformerEngine as verl's wheelhouse serves it: one `transformer-engine` wheel built against
torch (the Python package, the CUDA core and the transformer_engine_torch module) that the recipe
takes in place of PyPI's transformer-engine, transformer-engine-cu13 and transformer-engine-torch.
The folders here have the real layout and file names; the wheels are not read (the integration
test installs real compiled ones: tests/integration/test_wheel_sources_install.py)."""

from __future__ import annotations

import dataclasses
import functools
import http.server
import threading
from pathlib import Path

import pytest

from tests.render_scenarios import Scenario, plan_for
from tests.unit.test_wheel_sources import wheelhouse
from verl_setup.environment.wheel_pick import resolve_wheels
from verl_setup.errors import InstallError
from verl_setup.plan.outlook import outlook
from verl_setup.plan.recipe import build_recipe
from verl_setup.plan.steps import Choice, Recipe

TE = "transformer-engine-torch"
WHOLE = "transformer_engine-2.16.1-cp312-cp312-linux_x86_64.whl"
MODULE = "transformer_engine_torch-2.16.1-cp312-cp312-linux_x86_64.whl"
H100 = {"driver": "580.95.05", "gpus": ("H100",), "python": "3.12", "backend": "megatron"}


def megatron(verl: str = "0.9") -> Scenario:
    return Scenario(f"h100-megatron-{verl}", {**H100, "verl": verl})


def index(root: Path, pages: dict[str, dict[str, str | None]]) -> Path:
    """DIR/simple/<project>/index.html per project, as test_wheel_sources writes flash-attn's."""
    for project, files in pages.items():
        wheelhouse(root, files, project)
    return root / "simple"


def users_only(recipe: Recipe) -> Recipe:
    """Every extension's matrix sources dropped (GitHub Pages is not asked from a test)."""
    kept = tuple(
        dataclasses.replace(e, candidates=tuple(c for c in e.candidates if c.source.startswith("user ")))
        for e in recipe.extensions
    )
    return dataclasses.replace(recipe, extensions=kept)


def everywhere(recipe: Recipe) -> list[str]:
    return [r for s in recipe.steps if s.name != TE for r in s.requirements]


def test_verl_s_wheelhouse_serves_transformer_engine_whole_in_place_of_the_three_pypi_packages() -> None:
    plan = plan_for(megatron())
    assert plan.row.id == "verl0.9-vllm0.24.0-megatron"
    recipe = build_recipe(plan)
    te = recipe.extension(TE)
    assert te is not None
    assert (te.mode, te.source, te.distribution) == ("wheel", "verl-wheelhouse", "transformer-engine")
    assert "in place of transformer-engine, transformer-engine-cu13, transformer-engine-torch" in te.reason
    (step,) = [s for s in recipe.steps if s.name == TE]
    assert "transformer-engine==2.16.1" in step.requirements
    assert step.extra_index_url == "https://verl-project.github.io/verl-wheelhouse/cu130/torch2.11/simple/"
    assert step.no_build == ("transformer-engine",)
    others = everywhere(recipe)
    assert not [r for r in others if r.startswith("transformer-engine")], others
    assert "transformer-engine==2.16.1" in recipe.verify_pins
    assert not [p for p in recipe.verify_pins if p.startswith(("transformer-engine-cu13", TE))]
    entries = {e["name"]: e for e in outlook(plan, requests={}, wheel_sources=(), env={})}
    assert (entries[TE]["mode"], entries[TE]["source"]) == ("wheel", "verl-wheelhouse")
    assert entries[TE]["distribution"] == "transformer-engine"
    assert (entries["apex"]["mode"], entries["apex"]["source"]) == ("wheel", "verl-wheelhouse")


def test_with_no_whole_wheel_for_its_version_the_row_keeps_the_pypi_split_and_refuses() -> None:
    plan = plan_for(megatron("0.8"))
    assert plan.row.packages[TE] == "2.15.0"  # the wheelhouse's TransformerEngine is 2.16.1
    with pytest.raises(InstallError) as caught:
        build_recipe(plan)
    message = str(caught.value)
    assert message.startswith(f"{TE} 2.15.0 has no prebuilt wheel for torch 2.11.0")
    assert f"no {TE} 2.15.0; no transformer-engine 2.15.0" in message
    assert "verl-setup wheelhouse build --row verl0.8-vllm0.20.2-megatron" in message
    built = build_recipe(plan, extensions={TE: "build", "apex": "build"}, nvcc_version="13.0", cores=2)
    assert "transformer-engine-cu13==2.15.0" in built.step("verl").requirements  # type: ignore[union-attr]


@pytest.mark.parametrize("as_url", [False, True], ids=["path", "file-url"])
def test_a_user_s_folder_with_the_whole_wheel_takes_its_place_at_install_time(
    tmp_path: Path, as_url: bool
) -> None:
    simple = index(
        tmp_path,
        {
            # PyPI's pure-Python transformer-engine is not the whole project: never taken as it.
            "transformer-engine": {"transformer_engine-2.16.1-py3-none-any.whl": None, WHOLE: "2.11.0"},
        },
    )
    source = simple.as_uri() if as_url else str(simple)
    plan = plan_for(megatron())
    recipe = users_only(
        build_recipe(plan, wheel_sources=(source,), extensions={"flash-attn": "without", "apex": "without"})
    )
    te = recipe.extension(TE)
    assert te is not None
    assert te.distribution is None
    said: list[str] = []
    pinned = resolve_wheels(plan, recipe, said.append)
    te = pinned.extension(TE)
    assert te is not None
    assert te.url == (tmp_path / "wheels" / WHOLE).as_uri()
    assert te.distribution == "transformer-engine"
    assert f"transformer-engine @ {te.url}" in pinned.step(TE).requirements  # type: ignore[union-attr]
    assert not [r for r in everywhere(pinned) if r.startswith("transformer-engine")]
    assert WHOLE in said[0]
    assert "built for torch 2.11.0" in said[0]


def test_a_folder_with_only_the_torch_module_keeps_the_companions(tmp_path: Path) -> None:
    """`wheelhouse build` builds transformer-engine-torch from PyPI's sdist: that wheel goes beside
    PyPI's transformer-engine and transformer-engine-cu13."""
    simple = index(tmp_path, {TE: {MODULE: "2.11.0"}})
    plan = plan_for(megatron())
    recipe = users_only(
        build_recipe(
            plan, wheel_sources=(str(simple),), extensions={"flash-attn": "without", "apex": "without"}
        )
    )
    pinned = resolve_wheels(plan, recipe, lambda _line: None)
    te = pinned.extension(TE)
    assert te is not None
    assert te.distribution is None
    assert te.url is not None
    assert te.url.endswith(MODULE)
    assert "transformer-engine-cu13==2.16.1" in pinned.step("verl").requirements  # type: ignore[union-attr]
    assert "transformer-engine-torch==2.16.1" in pinned.verify_pins


def test_a_whole_wheel_built_for_another_torch_is_passed_over_naming_it(tmp_path: Path) -> None:
    simple = index(tmp_path, {"transformer-engine": {WHOLE: "2.13.0"}})
    plan = plan_for(megatron())
    recipe = users_only(
        build_recipe(
            plan, wheel_sources=(str(simple),), extensions={"flash-attn": "without", "apex": "without"}
        )
    )
    with pytest.raises(InstallError) as caught:
        resolve_wheels(plan, recipe, lambda _line: None)
    message = str(caught.value)
    assert f"{TE} 2.16.1 has no prebuilt wheel for torch 2.11.0" in message
    assert f"user {simple}: only wheels built for torch 2.13.0" in message
    assert "nothing was changed" in message


def test_an_http_index_without_a_page_for_the_whole_project_falls_back_to_the_torch_module(
    tmp_path: Path,
) -> None:
    """A 404 for /simple/transformer-engine/ means the index does not hold it, not that it is down."""
    index(tmp_path, {TE: {MODULE: "2.11.0"}})
    handler = functools.partial(_Quiet, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/simple/"
        plan = plan_for(megatron())
        off: dict[str, Choice] = {"flash-attn": "without", "apex": "without"}
        recipe = users_only(build_recipe(plan, wheel_sources=(url,), extensions=off))
        te = resolve_wheels(plan, recipe, lambda _line: None).extension(TE)
    finally:
        server.shutdown()
    assert te is not None
    assert te.url == f"{url.removesuffix('simple/')}wheels/{MODULE}"
    assert te.distribution is None


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *_args: object) -> None:
        pass

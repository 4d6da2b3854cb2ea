"""Wheel sources: the order they are tried in, what each says it serves, and how install looks a
wheel up in an index (a PEP 503 folder written here with the real layout and file names)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.render_scenarios import SCENARIOS, plan_for
from verl_setup.environment.wheel_pick import resolve_wheels
from verl_setup.errors import InstallError
from verl_setup.plan.outlook import outlook
from verl_setup.plan.recipe import Recipe, build_recipe

H200 = next(s for s in SCENARIOS if s.name == "h200-drv580-py312-vllm")  # torch 2.11.0, cp312
MEGATRON = next(s for s in SCENARIOS if s.name == "h100-drv535-forward-megatron")


def wheelhouse(root: Path, files: dict[str, str | None], project: str = "flash-attn") -> Path:
    """DIR/simple/<project>/index.html linking ../../wheels/<file>#sha256=..., each file with
    the manifest beside it that names its torch (None: no manifest)."""
    (root / "wheels").mkdir(parents=True, exist_ok=True)
    page = root / "simple" / project
    page.mkdir(parents=True)
    links = []
    for name, torch in files.items():
        (root / "wheels" / name).write_bytes(b"not read here")
        if torch is not None:
            (root / "wheels" / f"{name}.json").write_text(json.dumps({"schema": 1, "torch": torch}))
        links.append(f'<a href="../../wheels/{name}#sha256={"ab" * 32}">{name}</a>')
    (page / "index.html").write_text("<html><body>" + "<br/>".join(links) + "</body></html>")
    return root / "simple"


def users_only(recipe: Recipe) -> Recipe:
    """The recipe with flash-attn's matrix sources dropped (GitHub Pages is not asked from a test)."""
    fa = recipe.extensions[0]
    kept = tuple(c for c in fa.candidates if c.source.startswith("user "))
    return dataclasses.replace(recipe, extensions=(dataclasses.replace(fa, candidates=kept),))


def test_a_wheel_whose_manifest_names_the_row_s_torch_is_taken_before_the_matrix_s_sources(
    tmp_path: Path,
) -> None:
    simple = wheelhouse(
        tmp_path,
        {
            "flash_attn-2.8.3-cp311-cp311-linux_x86_64.whl": "2.11.0",  # another Python
            "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl": "2.11.0+cu130",
        },
    )
    plan = plan_for(H200)
    recipe = build_recipe(plan, wheel_sources=(str(simple),))
    said: list[str] = []
    fa = resolve_wheels(plan, recipe, said.append).flash_attn
    assert fa is not None
    assert fa.url == (tmp_path / "wheels" / "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl").as_uri()
    assert fa.sha256 == "ab" * 32
    assert fa.source == f"user {simple}"
    assert "built for torch 2.11.0+cu130" in said[0]
    step = resolve_wheels(plan, recipe, said.append).steps
    (fa_step,) = [s for s in step if s.name == "flash-attn"]
    assert f"flash-attn @ {fa.url}" in fa_step.requirements
    assert fa_step.extra_index_url is None


def test_a_wheel_built_for_another_torch_is_passed_over_with_the_reason(tmp_path: Path) -> None:
    simple = wheelhouse(tmp_path, {"flash_attn-2.8.3+cu130torch2.13-cp312-cp312-linux_x86_64.whl": None})
    plan = plan_for(H200)
    recipe = users_only(build_recipe(plan, wheel_sources=(str(simple),)))
    with pytest.raises(InstallError) as caught:
        resolve_wheels(plan, recipe, lambda _line: None)
    message = str(caught.value)
    assert "\n" not in message
    assert f"user {simple}: only wheels built for torch 2.13" in message
    assert "nothing was changed" in message


def test_a_wheel_that_says_nothing_of_its_torch_is_left_to_the_abi_check(tmp_path: Path) -> None:
    simple = wheelhouse(tmp_path, {"flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl": None})
    said: list[str] = []
    plan = plan_for(H200)
    resolve_wheels(plan, build_recipe(plan, wheel_sources=(str(simple),)), said.append)
    assert "its torch is read by the ABI check" in said[0]


def test_an_unreachable_index_falls_through_to_the_next_source(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    plan = plan_for(H200)
    recipe = users_only(build_recipe(plan, wheel_sources=("http://127.0.0.1:9/simple/", str(empty))))
    with pytest.raises(InstallError) as caught:
        resolve_wheels(plan, recipe, lambda _line: None)
    message = str(caught.value)
    # The cause first (issue 32): the source that did not answer, then what the others said.
    assert message.startswith("could not reach user http://127.0.0.1:9/simple/ (http://127.0.0.1:9/simple/: ")
    assert f"also user {empty}: no flash-attn 2.8.3 wheel" in message


def test_plan_says_per_extension_what_install_will_do() -> None:
    entries = {e["name"]: e for e in outlook(plan_for(MEGATRON), requests={}, wheel_sources=(), env={})}
    assert entries["flash-attn"]["mode"] == "wheel"
    assert entries["flash-attn"]["source"] == "verl-wheelhouse"
    # verl's wheelhouse serves TransformerEngine whole (tests/unit/test_whole_wheel.py).
    assert entries["transformer-engine-torch"]["mode"] == "wheel"
    assert "the whole transformer-engine in one wheel" in entries["transformer-engine-torch"]["reason"]
    built = outlook(plan_for(MEGATRON), requests={"apex": "build"}, wheel_sources=(), env={})
    assert {e["name"]: e["mode"] for e in built}["apex"] == "build"


def test_an_image_builds_what_no_source_has_instead_of_refusing(tmp_path: Path) -> None:
    from tests.conftest import run_cli  # noqa: PLC0415

    out = tmp_path / "out"
    done = run_cli(
        "render", "docker", "--row", "verl0.9-vllm0.19.1-cu128", "--driver", "570.124.06", "--gpu", "H100",
        "--out", str(out),
    )  # fmt: skip
    assert done.code == 0, done.err
    dockerfile = (out / "Dockerfile").read_text()
    assert "flash-attn 2.8.3 (built against the installed torch)" in dockerfile
    builds = [line for line in dockerfile.splitlines() if " flash-attn==2.8.3 " in line]
    assert any(line.endswith("--no-binary flash-attn --no-build-isolation") for line in builds), builds

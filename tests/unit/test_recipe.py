"""One recipe, four readings: `install`, the rendered setup-venv.sh, the Dockerfile and the
Apptainer definition run the same uv steps, in the same order, with the same packages, indexes
and options."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.conftest import host
from tests.render_scenarios import SCENARIOS, Scenario, plan_for, render_scenario
from verl_setup.environment.install_job import uv_commands
from verl_setup.environment.python_choice import PythonChoice
from verl_setup.errors import BadInputError, InstallError
from verl_setup.host.facts import HostFacts
from verl_setup.plan.recipe import build_recipe
from verl_setup.plan.steps import Choice

SENTINEL = "OVERRIDES"
CLOSURE = "CONSTRAINTS"


def _normalise(tokens: list[str]) -> list[str]:
    """The arguments after `uv pip install`, minus what only says where (interpreter, cache, file)."""
    out, skip = [], False
    for i, arg in enumerate(tokens):
        if skip:
            skip = False
        elif arg == "--python":
            skip = True
        elif arg != "--no-cache":
            previous = tokens[i - 1] if i > 0 else ""
            named = {"--override": SENTINEL, "--constraint": CLOSURE}
            out.append(named.get(previous, arg))
    return out


def _after_install(tokens: list[str]) -> list[str] | None:
    for i in range(len(tokens) - 2):
        if tokens[i].endswith("uv") and tokens[i + 1 : i + 3] == ["pip", "install"]:
            return _normalise(tokens[i + 3 :])
    return None


def from_install(scenario: Scenario) -> list[list[str]]:
    plan = plan_for(scenario)
    recipe = build_recipe(
        plan, extensions=scenario.options.get("extensions", {}), nvcc_version=plan.row.torch.cuda
    )
    choice = PythonChoice(request=plan.python, version=plan.python, source="test")
    commands = uv_commands("uv", Path("/stage"), choice, recipe, None)
    return [_normalise(c.argv[3:]) for c in commands if c.step is not None]


def from_script(scenario: Scenario, tmp_path: Path) -> list[list[str]]:
    (script,) = [f for f in render_scenario(scenario, ("venv",)) if f.name == "setup-venv.sh"]
    path = tmp_path / "setup-venv.sh"
    path.write_text(script.content)
    out = subprocess.run(
        ["bash", str(path), "--dry-run", "--python", "/usr/bin/python3", "--venv", str(tmp_path / "v")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    steps = []
    for line in out.stdout.splitlines():
        if line.startswith("+ ") and " pip install " in line:
            found = _after_install(shlex.split(line[2:]))
            if found is not None:
                steps.append(found)
    return steps


def from_dockerfile(scenario: Scenario) -> list[list[str]]:
    (dockerfile,) = [f for f in render_scenario(scenario, ("docker",)) if f.name == "Dockerfile"]
    text = re.sub(r"\\\n", " ", dockerfile.content)
    steps = []
    for line in text.splitlines():
        if line.startswith("RUN ") and "uv pip install" in line:
            found = _after_install(
                shlex.split(line[4:].replace("--mount=type=cache,target=/root/.cache/uv", ""))
            )
            if found is not None:
                steps.append(found)
    return steps


def from_definition(scenario: Scenario) -> list[list[str]]:
    (definition,) = [f for f in render_scenario(scenario, ("apptainer",)) if f.name == "verl.def"]
    post = definition.content.split("%post", 1)[1].split("\n%", 1)[0]
    found = (_after_install(shlex.split(line)) for line in post.splitlines() if "uv pip install" in line)
    return [step for step in found if step is not None]


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.name != "hostile"], ids=lambda s: s.name)
@pytest.mark.subprocess
def test_install_script_dockerfile_and_definition_run_the_same_uv_steps(
    scenario: Scenario, tmp_path: Path
) -> None:
    expected = from_install(scenario)
    assert len(expected) >= 1  # the row in one resolve at least
    assert from_script(scenario, tmp_path) == expected
    assert from_definition(scenario) == expected
    # An image alone installs torch first, as a layer of its own; then the same steps.
    dockerfile = from_dockerfile(scenario)
    assert dockerfile[1:] == expected
    assert {a.split("==")[0] for a in dockerfile[0] if "==" in a} <= {"torch", "torchvision", "torchaudio"}


def test_a_venv_installs_the_row_in_one_resolve_with_torch_in_it() -> None:
    (scenario,) = [s for s in SCENARIOS if s.name == "h200-drv580-py312-vllm"]
    recipe = build_recipe(plan_for(scenario), flash_attn="build", nvcc_version="13.0", cores=8, memory_gib=64)
    first = recipe.venv_steps[0]
    assert first.name == "verl"
    assert any(r.startswith("torch==") for r in first.requirements)
    assert [s.name for s in recipe.steps if s.layer_only] == ["torch"]


def test_the_order_is_torch_then_the_row_in_one_resolve_then_flash_attn_built_against_its_torch() -> None:
    (scenario,) = [s for s in SCENARIOS if s.name == "h200-drv580-py312-vllm"]  # builds flash-attn
    recipe = build_recipe(plan_for(scenario), flash_attn="build", nvcc_version="13.0", cores=8, memory_gib=64)
    assert [s.name for s in recipe.steps] == ["torch", "verl", "flash-attn-build-requires", "flash-attn"]
    fa = recipe.steps[3]
    assert fa.no_build_isolation
    assert dict(fa.env) == {"MAX_JOBS": "8"}
    assert "flash-attn==2.8.3" in fa.requirements
    assert not any(r.startswith("flash-attn") for r in recipe.steps[1].requirements)
    assert "flash-attn==2.8.3" in recipe.verify_pins


def test_max_jobs_follows_memory_when_memory_is_the_limit() -> None:
    (scenario,) = [s for s in SCENARIOS if s.name == "h200-drv580-py312-vllm"]
    recipe = build_recipe(
        plan_for(scenario), flash_attn="build", nvcc_version="13.0", cores=64, memory_gib=24
    )
    assert dict(recipe.steps[3].env) == {"MAX_JOBS": "6"}


def test_a_prebuilt_wheel_is_chosen_for_torch_2_6_with_the_old_abi_and_the_python() -> None:
    (scenario,) = [s for s in SCENARIOS if s.name == "a100-drv550-verl04"]
    recipe = build_recipe(plan_for(scenario))
    fa = recipe.flash_attn
    assert fa is not None
    assert fa.mode == "wheel"
    assert fa.cxx11abi is False
    assert fa.url is not None
    assert fa.url.endswith(
        "/v2.7.4.post1/flash_attn-2.7.4.post1+cu12torch2.6cxx11abiFALSE-cp310-cp310-linux_x86_64.whl"
    )


def test_torch_2_11_gets_flash_attn_from_verl_wheelhouse_s_torch_2_11_index_without_a_flag() -> None:
    (scenario,) = [s for s in SCENARIOS if s.name == "h200-drv580-py312-vllm"]
    fa = build_recipe(plan_for(scenario)).flash_attn
    assert fa is not None
    assert (fa.mode, fa.source) == ("wheel", "verl-wheelhouse")
    # The world's own index, never /simple/ (an alias that moved to torch 2.13).
    assert fa.index_url == "https://verl-project.github.io/verl-wheelhouse/cu130/torch2.11/simple/"
    assert fa.url is None  # looked up at install time, then read by the ABI check


def test_a_user_source_comes_before_the_matrix_s(tmp_path: Path) -> None:
    (scenario,) = [s for s in SCENARIOS if s.name == "h200-drv580-py312-vllm"]
    fa = build_recipe(plan_for(scenario), env={"VERL_SETUP_WHEEL_SOURCES": str(tmp_path)}).flash_attn
    assert fa is not None
    assert [c.source for c in fa.candidates] == [f"user {tmp_path}", "verl-wheelhouse"]
    assert fa.index_url == tmp_path.as_uri() + "/"
    step = build_recipe(plan_for(scenario), wheel_sources=(str(tmp_path),)).step("flash-attn")
    assert step is not None
    args = step.pip_args("o", "c")
    assert args[args.index("--no-build-package") + 1] == "flash-attn"  # never PyPI's sdist
    with pytest.raises(BadInputError, match="no such folder"):
        build_recipe(plan_for(scenario), wheel_sources=(str(tmp_path / "missing"),))


def test_no_wheel_in_any_source_is_one_line_naming_every_way_out() -> None:
    machine = host(driver="570.124.06", gpus=(("NVIDIA H100 80GB HBM3", "9.0"),))
    request = {"verl": "0.9.1", "engine": "vllm", "python": "3.12.3"}
    plan = plan_for(Scenario("r570", request, machine=machine))
    assert plan.row.torch.version == "2.10.0"
    with pytest.raises(InstallError) as caught:
        build_recipe(plan, cores=16, memory_gib=128)
    message = str(caught.value)
    assert "\n" not in message
    assert "has no prebuilt wheel for torch 2.10.0 in any enabled source" in message
    assert "flash-attn-releases: flash-attn 2.8.3 published no wheel for torch 2.10" in message
    assert "verl-wheelhouse: no build for torch 2.10" in message
    command = f"`verl-setup wheelhouse build --row {plan.row.id}`"
    assert f"{command} (about 20 min with 16 build jobs here" in message
    assert "--wheel-source DIR" in message
    assert "--build-flash-attn" in message
    assert "--without flash-attn" in message
    assert "use_remove_padding=False" in message  # what verl 0.9 then needs, from its code
    assert "nothing was changed" in message


def test_a_build_with_nvcc_of_another_cuda_major_is_refused() -> None:
    (scenario,) = [s for s in SCENARIOS if s.name == "h200-drv580-py312-vllm"]
    with pytest.raises(InstallError, match=r"nvcc is CUDA 12\.4, torch 2\.11\.0 is built with CUDA 13\.0"):
        build_recipe(plan_for(scenario), flash_attn="build", nvcc_version="12.4")
    with pytest.raises(InstallError, match=r"needs nvcc of CUDA 13\.0"):
        build_recipe(plan_for(scenario), flash_attn="build", nvcc_version=None)


def test_a_rhel8_glibc_gets_no_ubuntu_22_04_wheel_and_is_told_why() -> None:
    """flash-attn 2.8.x wheels need GLIBC_2.32 (flash-attention #1762, PR #1780): a glibc 2.28 host
    passes the row's own glibc check, and must not get the wheel that fails at `import flash_attn`."""
    rhel8 = host(driver="570.124.06", gpus=(("NVIDIA H100 80GB HBM3", "9.0"),), glibc="2.28")
    scenario = Scenario("rhel8", {"verl": "0.6.1", "engine": "vllm", "python": "3.12.3"}, machine=rhel8)
    plan = plan_for(scenario)
    assert plan.row.packages["flash-attn"] == "2.8.3"
    with pytest.raises(
        InstallError, match=r"its prebuilt wheels need glibc >= 2\.32 and the target has 2\.28"
    ):
        build_recipe(plan)
    on_ubuntu = plan_for(
        Scenario("u22", dict(scenario.request), machine=host(driver="570.124.06", gpus=rhel8_gpus(rhel8)))
    )
    fa = build_recipe(on_ubuntu).flash_attn
    assert fa is not None
    assert fa.mode == "wheel"


def rhel8_gpus(facts: HostFacts) -> tuple[tuple[str, str | None], ...]:
    return tuple((g.name, g.compute_capability) for g in facts.gpus)


# Packages built against torch beyond flash-attn: the Megatron rows' TransformerEngine and apex.

MEGATRON = next(s for s in SCENARIOS if s.name == "h100-drv535-forward-megatron")


def test_transformer_engine_builds_in_its_own_step_after_torch_with_its_build_settings() -> None:
    recipe = build_recipe(
        plan_for(MEGATRON),
        extensions={"flash-attn": "build", "transformer-engine-torch": "build", "apex": "build"},
        nvcc_version="13.0",
        cores=8,
        memory_gib=64,
    )
    names = [s.name for s in recipe.steps]
    assert names.index("transformer-engine-torch") > names.index("verl")
    te = recipe.step("transformer-engine-torch")
    assert te is not None
    assert te.no_build_isolation
    assert dict(te.env)["NVTE_FRAMEWORK"] == "pytorch"
    assert "transformer-engine-torch==2.16.1" in te.requirements
    apex = recipe.step("apex")
    assert apex is not None
    assert "apex @ git+https://github.com/NVIDIA/apex.git" in apex.requirements
    assert apex.pip_args("o", "c")[-4:] == [
        "--config-settings", "--build-option=--cpp_ext", "--config-settings", "--build-option=--cuda_ext",
    ]  # fmt: skip
    assert "transformer-engine-torch==2.16.1" in recipe.verify_pins
    assert not any(p.startswith("apex") for p in recipe.verify_pins)  # a git build has no pin to check


def test_leaving_transformer_engine_out_takes_its_python_package_with_it() -> None:
    recipe = build_recipe(
        plan_for(MEGATRON),
        extensions={"flash-attn": "without", "transformer-engine-torch": "without", "apex": "without"},
    )
    everything = [r for s in recipe.steps for r in s.requirements] + list(recipe.verify_pins)
    assert not [r for r in everything if r.startswith("transformer-engine")]
    assert "megatron-core==0.18.0" in recipe.verify_pins
    assert any("transformer-engine-torch 2.16.1 left out" in w for w in recipe.warnings)


def test_a_megatron_row_without_a_choice_for_transformer_engine_is_refused_in_one_line() -> None:
    # verl 0.8's TransformerEngine 2.15.0: no source serves it (verl's wheelhouse has 2.16.1 whole).
    verl08 = Scenario(
        "verl0.8-megatron", {"driver": "580.95.05", "gpus": ("H100",), "backend": "megatron", "verl": "0.8"}
    )
    with pytest.raises(InstallError) as caught:
        build_recipe(plan_for(verl08), extensions={"flash-attn": "without", "apex": "without"})
    message = str(caught.value)
    assert "\n" not in message
    assert "transformer-engine-torch 2.15.0 has no prebuilt wheel for torch 2.11.0" in message
    assert "--build transformer-engine-torch" in message
    assert "--without transformer-engine-torch" in message


def test_an_unknown_package_name_for_build_is_bad_input_with_a_suggestion() -> None:
    with pytest.raises(BadInputError, match="did you mean 'transformer-engine-torch'"):
        build_recipe(plan_for(MEGATRON), extensions={"transformer-engine-torc": "build"})


def test_megatron_bridges_come_last_without_dependencies_and_a_git_source_may_be_left_out() -> None:
    off: dict[str, Choice] = {
        "flash-attn": "without",
        "transformer-engine-torch": "without",
        "apex": "without",
    }
    recipe = build_recipe(plan_for(MEGATRON), extensions=off)
    assert recipe.steps[-1].name == "no-deps"
    assert recipe.steps[-1].requirements == (
        "megatron-bridge==0.5.0",
        "mbridge @ git+https://github.com/ISEEKYAN/mbridge.git@641a5a0",
    )
    assert recipe.steps[-1].pip_args("o", "c")[-1] == "--no-deps"
    verl = recipe.step("verl")
    assert verl is not None
    assert not [r for r in verl.requirements if r.startswith(("mbridge", "megatron-bridge"))]
    assert "megatron-bridge==0.5.0" in recipe.verify_pins
    assert not [p for p in recipe.verify_pins if p.startswith("mbridge")]  # a git source has no pin
    without = build_recipe(plan_for(MEGATRON), extensions={**off, "mbridge": "without"})
    assert without.steps[-1].requirements == ("megatron-bridge==0.5.0",)
    assert without.left_out_sources_modules() == {"mbridge": "mbridge left out (--without mbridge)"}
    with pytest.raises(BadInputError):
        build_recipe(plan_for(MEGATRON), extensions={**off, "mbridge": "build"})

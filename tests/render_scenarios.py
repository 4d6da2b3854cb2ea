"""Render scenarios shared by the golden, lint and hostile-value tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import host
from verl_setup.host.facts import HostFacts
from verl_setup.matrix.load import load_matrix
from verl_setup.plan.request import Request
from verl_setup.plan.select import Plan, select
from verl_setup.plan.target import build_target
from verl_setup.render.templates import RenderedFile, RenderOptions, expand_targets, render
from verl_setup.render.values import ContainerSpec

GOLDEN = Path(__file__).parent / "golden"
HOSTILE_HF_HOME = "/tmp/$(touch pwned-hf)`touch pwned-tick` it's; touch pwned-semi"
HOSTILE_IMAGE = "/images/verl $(touch pwned-image)'q'.sif"


@dataclass(frozen=True)
class Scenario:
    """A named plan request plus render options, on a machine described by host facts."""

    name: str
    request: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    machine: HostFacts = field(default_factory=host)


SCENARIOS = [
    Scenario(
        "h100-drv535-py310-vllm",
        {"driver": "535.129.03", "gpus": ("H100",), "python": "3.10.12", "engine": "vllm"},
        {"extensions": {"flash-attn": "without"}},
    ),
    Scenario(
        "h200-drv580-py312-vllm",
        {"driver": "580.95.05", "gpus": ("H200",), "python": "3.12.3", "engine": "vllm"},
        {
            "hf_home": "/data/hf",
            "iface": "ib0",
            "nodes": 2,
            "gpus_per_node": 8,
            "job": "python3 -m verl.trainer.main_ppo trainer.total_epochs=1",
            "head_ip": "10.0.0.1",
            "extensions": {"flash-attn": "build"},
            "container": ContainerSpec(kind="pyxis", image="nvcr.io#verl-setup/verl:h200"),
        },
    ),
    Scenario(
        "b200-drv570-sglang",
        {"driver": "570.133.20", "gpus": ("B200",), "engine": "sglang"},
        {"buildkit": True, "extensions": {"flash-attn": "build"}},
    ),
    Scenario(
        "a100-drv550-verl04",
        {"driver": "550.54.15", "gpus": ("A100",), "verl": "0.4"},
        {"gpus_per_node": 4},
        host(driver="550.54.15", gpus=(("NVIDIA A100-SXM4-80GB", "8.0"),)),
    ),
    Scenario("cpu", {"no_gpu": True, "python": "3.12.3"}),
    # CUDA forward compatibility for a CUDA 13 Megatron row on R535, with TransformerEngine built.
    Scenario(
        "h100-drv535-forward-megatron",
        {"driver": "535.129.03", "gpus": ("H100",), "policy": "forward", "backend": "megatron"},
        {"extensions": {"flash-attn": "build", "transformer-engine-torch": "build", "apex": "without"}},
    ),
    Scenario(
        "hostile",
        {"no_gpu": True},
        {
            "hf_home": HOSTILE_HF_HOME,
            "iface": "eth0;touch pwned-iface",
            "venv": 'venv with spaces/$(touch pwned-venv)"q"',
            "job": "python3 -m verl.trainer.main_ppo 'data.path=a b' ; touch pwned-job",
            "namespace": "team-a",
            "container": ContainerSpec(kind="apptainer", image=HOSTILE_IMAGE),
        },
    ),
]


def plan_for(scenario: Scenario) -> Plan:
    """Select the scenario's row on its machine, never the machine running the tests."""
    matrix = load_matrix()
    target = build_target(
        Request(**scenario.request),
        env={},
        rules=matrix.cuda,
        detect=lambda: scenario.machine,
        load_host=lambda _path: scenario.machine,
    )
    return select(target, matrix)


def render_scenario(
    scenario: Scenario, targets: tuple[str, ...] = ("all", "uv-project")
) -> list[RenderedFile]:
    """Every file of the scenario."""
    options = RenderOptions(targets=expand_targets(list(targets)), **scenario.options)
    return render(plan_for(scenario), options)
